// CUDA kernels of kernels/add_norm.h; see add_norm_cuda.h.
//
// Forward: one warp per row, VEC elements per load, two-pass variance (no
// cancellation). The row is read three times (sum, squared deviations, output), the
// second and third time from cache; or, when asked, rows of the shipped widths (up to
// 2560) stay in each lane's registers from the one read. When asked, the third pass also
// takes max |h| of the stored values into one float (a warp maximum, then an atomic),
// the amax that h's FP8 quantization would otherwise read h again for.
// Backward: one block per row at a time, each thread owning the same columns of
// every row its block walks. A row's inputs are read once and held in registers
// while the block sums dh*w and dh*w*xhat over the row (a warp sum, then the
// warps' sums in a fixed order), so nothing is read twice; the weight and bias
// gradients of a thread's columns add up in its registers over the block's rows,
// with no shared-memory arrays (a warp per row keeping d-wide partials in shared
// memory fits 8 such warps on an SM at d = 2560, and its lanes' strided slots
// conflict 4 ways). The grid is one wave of resident blocks; each writes its
// partials to a (blocks, d) buffer that one ATen sum reduces: a fixed order of
// additions, so the weight gradient is the same on every run. When asked, the
// branch's gradient's max |dbranch| is raised into one float on the way (its FP8
// product's amax, kernels/amax_handoff.h).
#include "kernels/add_norm_cuda.h"
#include "kernels/common.cuh"

#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

namespace xsagpt {

namespace {

using namespace xsagpt::cuda;

constexpr int kFwdWarps = 8;  // rows per forward block

// A forward row's end: its statistics, and its lanes' max |h| raised into amax.
__device__ __forceinline__ void finish_row(int64_t row, int lane, float mu, float rs, float top,
                                           float* __restrict__ mean, float* __restrict__ rstd,
                                           float* __restrict__ amax) {
  if (amax) top = warp_max(top);
  if (lane == 0) {
    mean[row] = mu;
    rstd[row] = rs;
    if (amax) atomic_amax(amax, top);
  }
}

// B: the branch's dtype, float32 or L; either way it is added in float32.
template <typename L, typename B, int VEC>
__global__ void add_norm_forward_kernel(const float* __restrict__ x, const B* __restrict__ branch,
                                        const float* __restrict__ weight, const float* __restrict__ bias, float* x_out,
                                        L* __restrict__ h, float* __restrict__ mean, float* __restrict__ rstd,
                                        float* __restrict__ amax, int64_t N, int d, float eps) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kFwdWarps + threadIdx.x / kWarp;
  if (row >= N) return;  // whole warps leave together
  const int lane = threadIdx.x % kWarp;
  const float* xr = x + row * d;
  float* xo = branch ? x_out + row * d : nullptr;
  float sum = 0;
  for (int c = lane * VEC; c < d; c += kWarp * VEC) {
    auto v = load_vec<float, VEC>(xr + c);
    if (branch) {
      const auto b = load_vec<B, VEC>(branch + row * d + c);
#pragma unroll
      for (int j = 0; j < VEC; ++j) v.v[j] += static_cast<float>(b.v[j]);
      store_vec<float, VEC>(xo + c, v);  // read back below by this same thread
    }
#pragma unroll
    for (int j = 0; j < VEC; ++j) sum += v.v[j];
  }
  const float mu = warp_sum(sum) / d;
  const float* src = branch ? xo : xr;
  float sq = 0;
  for (int c = lane * VEC; c < d; c += kWarp * VEC) {
    const auto v = load_vec<float, VEC>(src + c);
#pragma unroll
    for (int j = 0; j < VEC; ++j) sq += (v.v[j] - mu) * (v.v[j] - mu);
  }
  const float rs = rsqrtf(warp_sum(sq) / d + eps);
  float top = 0;  // max |h| of this lane's elements, as stored (rounded to L)
  for (int c = lane * VEC; c < d; c += kWarp * VEC) {
    const auto v = load_vec<float, VEC>(src + c);
    const auto w = load_vec<float, VEC>(weight + c);
    Vec<L, VEC> out;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float b = bias ? bias[c + j] : 0.0f;
      out.v[j] = static_cast<L>((v.v[j] - mu) * rs * w.v[j] + b);
      top = fmaxf(top, fabsf(static_cast<float>(out.v[j])));
    }
    store_vec<L, VEC>(h + row * d + c, out);
  }
  finish_row(row, lane, mu, rs, top, mean, rstd, amax);
}

// The forward for rows of at most kWarp * 4 * ITER columns (4-wide vectors): a warp
// per row as above, but each lane keeps its ITER vectors of x + branch in registers
// from the one read, so the row comes from memory once and nothing is read back.
// The kernel above reads its row three times (the sums, the deviations, the output)
// and reads x_out back after writing it: 20 bytes an element through L2 for 12 from
// memory, which held it to about 2.2 TB/s on an H100 at 0.7B (6.6 ms a step for
// 302 MB a call), where the backward, reading once from registers, ran at 2.8.
constexpr int kFwdRegIters[] = {6, 12, 16, 20};  // rows of 768, 1536, 2048 and 2560: the shipped widths

template <typename L, typename B, int ITER>
__global__ void __launch_bounds__(kFwdWarps* kWarp)
    add_norm_forward_regs_kernel(const float* __restrict__ x, const B* __restrict__ branch,
                                 const float* __restrict__ weight, const float* __restrict__ bias, float* x_out,
                                 L* __restrict__ h, float* __restrict__ mean, float* __restrict__ rstd,
                                 float* __restrict__ amax, int64_t N, int d, float eps) {
  constexpr int VEC = 4;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kFwdWarps + threadIdx.x / kWarp;
  if (row >= N) return;  // whole warps leave together
  const int lane = threadIdx.x % kWarp;
  float v[ITER][VEC];
  float sum = 0;
#pragma unroll
  for (int k = 0; k < ITER; ++k) {
    const int c = (k * kWarp + lane) * VEC;
    // A whole vector is in or out (d % VEC == 0); one that is out holds zeros.
    auto a = c < d ? load_vec<float, VEC>(x + row * d + c) : Vec<float, VEC>{};
    if (branch && c < d) {
      const auto b = load_vec<B, VEC>(branch + row * d + c);
#pragma unroll
      for (int j = 0; j < VEC; ++j) a.v[j] += static_cast<float>(b.v[j]);
      store_vec<float, VEC>(x_out + row * d + c, a);
    }
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      v[k][j] = a.v[j];
      sum += a.v[j];
    }
  }
  const float mu = warp_sum(sum) / d;
  float sq = 0;
#pragma unroll
  for (int k = 0; k < ITER; ++k)
    if ((k * kWarp + lane) * VEC < d) {
#pragma unroll
      for (int j = 0; j < VEC; ++j) sq += (v[k][j] - mu) * (v[k][j] - mu);
    }
  const float rs = rsqrtf(warp_sum(sq) / d + eps);
  float top = 0;  // max |h| of this lane's elements, as stored (rounded to L)
#pragma unroll
  for (int k = 0; k < ITER; ++k) {
    const int c = (k * kWarp + lane) * VEC;
    if (c >= d) continue;
    const auto w = load_vec<float, VEC>(weight + c);
    const auto b = bias ? load_vec<float, VEC>(bias + c) : Vec<float, VEC>{};
    Vec<L, VEC> out;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      out.v[j] = static_cast<L>((v[k][j] - mu) * rs * w.v[j] + b.v[j]);
      top = fmaxf(top, fabsf(static_cast<float>(out.v[j])));
    }
    store_vec<L, VEC>(h + row * d + c, out);
  }
  finish_row(row, lane, mu, rs, top, mean, rstd, amax);
}

// The backward's block: kBwdMaxThreads at most, each thread owning ITER (1, 2 or 4)
// vectors of VEC columns of every row the block walks, in registers. The bound is
// what ptxas plans registers for: 4 x 4 columns need about 128 per thread, which
// 256 threads leave room for; 4 x 1 fit the 64 that 1024 threads allow (8 x 1 did
// not: they spilled). Either way 4096 columns at most.
template <int VEC>
constexpr int kBwdMaxThreads = VEC == 1 ? 1024 : 256;

// The first column of a thread's k-th vector: consecutive threads, consecutive
// vectors, so a warp's loads are contiguous.
template <int VEC>
__device__ __forceinline__ int column(int k) {
  return (k * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x)) * VEC;
}

template <typename L, int VEC, int ITER>
__global__ void __launch_bounds__(kBwdMaxThreads<VEC>)
    add_norm_backward_kernel(const L* __restrict__ dh, const float* __restrict__ dx_out,
                             const float* __restrict__ x_out, const float* __restrict__ mean,
                             const float* __restrict__ rstd, const float* __restrict__ weight, float* __restrict__ dx,
                             L* __restrict__ dbranch, float* __restrict__ dw_part, float* __restrict__ db_part,
                             float* __restrict__ dbranch_amax, int64_t N, int d, float inv_d, int64_t rows_per_block) {
  // Per warp, its share of the row sums (s1, s2); two buffers, so one barrier a row
  // suffices: a warp writes row r + 2's sums into row r's buffer only after the
  // barrier of row r + 1, which every warp passes after reading row r's.
  __shared__ float red[2][2][kBwdMaxThreads<VEC> / kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  float gw_sum[ITER][VEC] = {}, g_sum[ITER][VEC] = {};  // this thread's columns of the weight and bias gradients
  float top = 0;                                        // max |dbranch| of this thread's elements, as stored
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * rows_per_block, r1 = min(N, r0 + rows_per_block);
  for (int64_t row = r0; row < r1; ++row) {
    const float mu = mean[row], rs = rstd[row];
    // Held from the first half of the row to the second: dh*w, xhat and dx_out.
    float gw[ITER][VEC], xhat[ITER][VEC], next[ITER][VEC];
    float s1 = 0, s2 = 0;  // sums of dh*w and dh*w*xhat over the row
#pragma unroll
    for (int k = 0; k < ITER; ++k) {
      const int c = column<VEC>(k);
      // A whole vector is in or out (d % VEC == 0); one that is out adds zeros.
      const bool in = c < d;
      const auto xv = in ? load_vec<float, VEC>(x_out + row * d + c) : Vec<float, VEC>{};
      const auto gv = in ? load_vec<L, VEC>(dh + row * d + c) : Vec<L, VEC>{};
      const auto wv = in ? load_vec<float, VEC>(weight + c) : Vec<float, VEC>{};
      const auto nv = in && dx_out ? load_vec<float, VEC>(dx_out + row * d + c) : Vec<float, VEC>{};
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const float g = static_cast<float>(gv.v[j]);
        xhat[k][j] = (xv.v[j] - mu) * rs;
        gw[k][j] = g * wv.v[j];
        next[k][j] = nv.v[j];
        s1 += gw[k][j];
        s2 += gw[k][j] * xhat[k][j];
        gw_sum[k][j] += g * xhat[k][j];
        g_sum[k][j] += g;
      }
    }
    const int buf = static_cast<int>((row - r0) & 1);
    s1 = warp_sum(s1);
    s2 = warp_sum(s2);
    if (lane == 0) {
      red[buf][0][warp] = s1;
      red[buf][1][warp] = s2;
    }
    __syncthreads();
    s1 = s2 = 0;
    for (int i = 0; i < warps; ++i) {  // the same order in every thread and on every run
      s1 += red[buf][0][i];
      s2 += red[buf][1][i];
    }
    s1 *= inv_d;  // 1/d from the host: a division here would call a slow path and keep a stack frame
    s2 *= inv_d;
#pragma unroll
    for (int k = 0; k < ITER; ++k) {
      const int c = column<VEC>(k);
      if (c >= d) continue;
      Vec<float, VEC> out;
      Vec<L, VEC> out_low;
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        out.v[j] = rs * (gw[k][j] - s1 - xhat[k][j] * s2) + next[k][j];
        out_low.v[j] = static_cast<L>(out.v[j]);
        top = fmaxf(top, fabsf(static_cast<float>(out_low.v[j])));
      }
      store_vec<float, VEC>(dx + row * d + c, out);
      if (dbranch) store_vec<L, VEC>(dbranch + row * d + c, out_low);
    }
  }
#pragma unroll
  for (int k = 0; k < ITER; ++k) {
    const int c = column<VEC>(k);
    if (c >= d) continue;
    Vec<float, VEC> pw, pb;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      pw.v[j] = gw_sum[k][j];
      pb.v[j] = g_sum[k][j];
    }
    store_vec<float, VEC>(dw_part + blockIdx.x * static_cast<int64_t>(d) + c, pw);
    if (db_part) store_vec<float, VEC>(db_part + blockIdx.x * static_cast<int64_t>(d) + c, pb);
  }
  if (dbranch_amax) {  // every thread of the block is here (blocks are whole warps)
    top = warp_max(top);
    if (lane == 0) atomic_amax(dbranch_amax, top);
  }
}

void check_rows(const at::Tensor& t, const char* what, int64_t N, int64_t d, const at::Device& device) {
  TORCH_CHECK(t.dim() == 2 && t.size(0) == N && t.size(1) == d && t.is_contiguous(), "add_norm kernel: ", what,
              " must be contiguous (", N, ", ", d, "), got ", t.sizes());
  TORCH_CHECK(t.device() == device, "add_norm kernel: ", what, " is on ", t.device(), ", expected ", device);
}

// weight and bias are read as plain float32 arrays of d elements on x's device.
void check_vector(const at::Tensor& t, const char* what, int64_t d, const at::Device& device) {
  TORCH_CHECK(t.dim() == 1 && t.size(0) == d && t.is_contiguous() && t.scalar_type() == at::kFloat,
              "add_norm kernel: ", what, " must be a contiguous float32 (", d, "), got ", t.scalar_type(), " ",
              t.sizes(), t.is_contiguous() ? "" : " (not contiguous)");
  TORCH_CHECK(t.device() == device, "add_norm kernel: ", what, " is on ", t.device(), ", expected ", device);
}

// A type carried as a value into a generic lambda (std::type_identity is C++20).
template <typename T>
struct TypeTag {
  using type = T;
};

// How the backward covers a row of d columns in vectors of VEC: ITER vectors per
// thread and `threads` threads (a multiple of a warp). The fewest vectors per
// thread that keep a block at 256 threads or fewer, so several blocks share an SM;
// wider rows take more threads, up to the kernel's bound.
struct BackwardShape {
  int iter = 0, threads = 0;  // iter 0: the row is too wide
};

template <int VEC>
BackwardShape backward_shape(int64_t d) {
  const int64_t vectors = (d + VEC - 1) / VEC;
  for (const int64_t limit : {int64_t{256}, int64_t{kBwdMaxThreads<VEC>}})
    for (const int iter : {1, 2, 4}) {
      const int64_t threads = (vectors + iter - 1) / iter;
      if (threads <= limit) return {iter, static_cast<int>((threads + kWarp - 1) / kWarp * kWarp)};
    }
  return {};
}

// Blocks of `kernel` that fit on one SM at once (registers and shared memory), asked
// once per kernel, block size and device: the grid is one full wave, so no block
// waits for a second one while the others are done.
int resident_blocks(const void* kernel, int threads, int device) {
  static std::mutex m;
  static std::map<std::tuple<const void*, int, int>, int> known;
  const std::lock_guard<std::mutex> lock(m);
  const auto key = std::make_tuple(kernel, threads, device);
  if (const auto it = known.find(key); it != known.end()) return it->second;
  int blocks = 0;
  C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, 0));
  return known[key] = std::max(1, blocks);
}

// The ITER of kFwdRegIters whose rows first hold d columns, or 0 (none does).
int forward_regs_iter(int64_t d) {
  for (const int iter : kFwdRegIters)
    if (d <= static_cast<int64_t>(kWarp) * 4 * iter) return iter;
  return 0;
}

template <typename L>
constexpr int vec_width() {
  return 4;
}

template <typename L>
bool vec_ok(int64_t d, std::initializer_list<const void*> ptrs) {
  return d % vec_width<L>() == 0 && aligned_for<float, 4>(ptrs);  // float rows are the widest: 16-byte loads
}

}  // namespace

void add_norm_forward_cuda(const at::Tensor& x, const at::Tensor& branch, const at::Tensor& weight,
                           const at::Tensor& bias, double eps, at::Tensor& x_out, at::Tensor& h, at::Tensor& mean,
                           at::Tensor& rstd, at::Tensor& amax, bool rows_in_registers) {
  TORCH_CHECK(x.dim() == 2, "add_norm kernel: x must be (N, d), got ", x.sizes());
  TORCH_CHECK(!amax.defined() || (amax.numel() == 1 && amax.scalar_type() == at::kFloat &&
                                  amax.device() == x.device() && amax.is_contiguous()),
              "add_norm kernel: amax must be one float32 on ", x.device());
  const auto N = x.size(0), d = x.size(1);
  const auto dev = x.device();
  check_rows(x, "x", N, d, dev);
  check_rows(h, "h", N, d, dev);
  check_vector(weight, "weight", d, dev);
  if (bias.defined()) check_vector(bias, "bias", d, dev);
  check_vector(mean, "mean", N, dev);
  check_vector(rstd, "rstd", N, dev);
  if (branch.defined()) {
    check_rows(branch, "branch", N, d, dev);
    check_rows(x_out, "x_out", N, d, dev);
    TORCH_CHECK(branch.scalar_type() == h.scalar_type() || branch.scalar_type() == at::kFloat,
                "add_norm kernel: branch must be float32 or h's dtype ", h.scalar_type(), ", got ",
                branch.scalar_type());
    TORCH_CHECK(x_out.scalar_type() == at::kFloat, "add_norm kernel: x_out must be float32");
  }
  TORCH_CHECK(x.scalar_type() == at::kFloat, "add_norm kernel: x must be float32");
  if (N == 0) return;
  const c10::cuda::CUDAGuard guard(x.device());
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, h.scalar_type(), "add_norm_forward_cuda", [&] {
    using L = scalar_t;
    const dim3 grid(static_cast<unsigned>((N + kFwdWarps - 1) / kFwdWarps)), block(kFwdWarps * kWarp);
    const bool wide = vec_ok<L>(d, {x.const_data_ptr(), branch.defined() ? branch.const_data_ptr() : nullptr,
                                    weight.const_data_ptr(), x_out.const_data_ptr(), h.const_data_ptr()}) &&
                      aligned_for<L, 4>({h.const_data_ptr(), branch.defined() ? branch.const_data_ptr() : nullptr});
    auto launch = [&](auto kernel, auto branch_tag) {
      using B = typename decltype(branch_tag)::type;
      kernel<<<grid, block, 0, stream>>>(
          x.const_data_ptr<float>(), branch.defined() ? branch.const_data_ptr<B>() : nullptr,
          weight.const_data_ptr<float>(), bias.defined() ? bias.const_data_ptr<float>() : nullptr,
          branch.defined() ? x_out.mutable_data_ptr<float>() : nullptr, h.mutable_data_ptr<L>(),
          mean.mutable_data_ptr<float>(), rstd.mutable_data_ptr<float>(),
          amax.defined() ? amax.mutable_data_ptr<float>() : nullptr, N, static_cast<int>(d), static_cast<float>(eps));
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    };
    auto run = [&](auto vec_tag, auto branch_tag) {
      using B = typename decltype(branch_tag)::type;
      launch(add_norm_forward_kernel<L, B, decltype(vec_tag)::value>, branch_tag);
    };
    auto run_regs = [&](auto iter_tag, auto branch_tag) {
      using B = typename decltype(branch_tag)::type;
      launch(add_norm_forward_regs_kernel<L, B, decltype(iter_tag)::value>, branch_tag);
    };
    auto with_branch_type = [&](auto tag, auto launch) {
      if (branch.defined() && branch.scalar_type() == at::kFloat)
        launch(tag, TypeTag<float>{});
      else
        launch(tag, TypeTag<L>{});
    };
    // The narrowest register row that holds d; wider rows and unaligned ones take
    // the three-pass kernel.
    const int iter = wide && rows_in_registers ? forward_regs_iter(d) : 0;
    if (iter == 6)
      with_branch_type(std::integral_constant<int, 6>{}, run_regs);
    else if (iter == 12)
      with_branch_type(std::integral_constant<int, 12>{}, run_regs);
    else if (iter == 16)
      with_branch_type(std::integral_constant<int, 16>{}, run_regs);
    else if (iter == 20)
      with_branch_type(std::integral_constant<int, 20>{}, run_regs);
    else if (wide)
      with_branch_type(std::integral_constant<int, 4>{}, run);
    else
      with_branch_type(std::integral_constant<int, 1>{}, run);
  });
}

bool add_norm_backward_cuda_fits(int64_t d) { return d <= kAddNormBackwardMaxWidth; }

void add_norm_backward_cuda(const at::Tensor& dh, const at::Tensor& dx_out, const at::Tensor& x_out,
                            const at::Tensor& mean, const at::Tensor& rstd, const at::Tensor& weight, at::Tensor& dx,
                            at::Tensor& dbranch, at::Tensor& dweight, at::Tensor& dbias, at::Tensor& dbranch_amax) {
  TORCH_CHECK(x_out.dim() == 2, "add_norm kernel: x_out must be (N, d), got ", x_out.sizes());
  TORCH_CHECK(!dbranch_amax.defined() ||
                  (dbranch.defined() && dbranch_amax.numel() == 1 && dbranch_amax.scalar_type() == at::kFloat &&
                   dbranch_amax.device() == x_out.device() && dbranch_amax.is_contiguous()),
              "add_norm kernel: dbranch_amax needs dbranch, and must be one float32 on ", x_out.device());
  const auto N = x_out.size(0), d = x_out.size(1);
  const auto dev = x_out.device();
  check_rows(dh, "dh", N, d, dev);
  check_rows(x_out, "x_out", N, d, dev);
  check_rows(dx, "dx", N, d, dev);
  check_vector(weight, "weight", d, dev);
  check_vector(dweight, "dweight", d, dev);
  if (dbias.defined()) check_vector(dbias, "dbias", d, dev);
  check_vector(mean, "mean", N, dev);
  check_vector(rstd, "rstd", N, dev);
  TORCH_CHECK(x_out.scalar_type() == at::kFloat && dx.scalar_type() == at::kFloat,
              "add_norm kernel: x_out and dx must be float32");
  if (dx_out.defined()) {
    check_rows(dx_out, "dx_out", N, d, dev);
    TORCH_CHECK(dx_out.scalar_type() == at::kFloat, "add_norm kernel: dx_out must be float32");
  }
  if (dbranch.defined()) {
    check_rows(dbranch, "dbranch", N, d, dev);
    TORCH_CHECK(dbranch.scalar_type() == dh.scalar_type(), "add_norm kernel: dbranch and dh must share a dtype");
  }
  TORCH_CHECK(add_norm_backward_cuda_fits(d), "add_norm kernel: rows of ", d, " columns are wider than the ",
              kAddNormBackwardMaxWidth, " the backward kernel takes (add_norm_backward_cuda_fits(d) is false: use ",
              "the ATen twin)");
  if (N == 0 || d == 0) {  // no rows: zero gradients; no columns: nothing to write
    dweight.zero_();
    if (dbias.defined()) dbias.zero_();
    return;
  }
  const c10::cuda::CUDAGuard guard(x_out.device());
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  auto stream = at::cuda::getCurrentCUDAStream();
  at::Tensor dw_part, db_part;
  auto launch = [&](auto kernel, BackwardShape shape, auto dh_ptr, auto dbranch_ptr) {
    const int64_t wave = static_cast<int64_t>(sms) *
                         resident_blocks(reinterpret_cast<const void*>(kernel), shape.threads, x_out.get_device());
    const int64_t most = std::min(N, wave);
    const int64_t rows_per_block = (N + most - 1) / most;
    const int64_t blocks = (N + rows_per_block - 1) / rows_per_block;  // every block has a row
    dw_part = at::empty({blocks, d}, x_out.options());
    db_part = dbias.defined() ? at::empty({blocks, d}, x_out.options()) : at::Tensor();
    kernel<<<static_cast<unsigned>(blocks), shape.threads, 0, stream>>>(
        dh_ptr, dx_out.defined() ? dx_out.const_data_ptr<float>() : nullptr, x_out.const_data_ptr<float>(),
        mean.const_data_ptr<float>(), rstd.const_data_ptr<float>(), weight.const_data_ptr<float>(),
        dx.mutable_data_ptr<float>(), dbranch_ptr, dw_part.mutable_data_ptr<float>(),
        dbias.defined() ? db_part.mutable_data_ptr<float>() : nullptr,
        dbranch_amax.defined() ? dbranch_amax.mutable_data_ptr<float>() : nullptr, N, static_cast<int>(d),
        1.0f / static_cast<float>(d), rows_per_block);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  };
  auto run = [&](auto type_tag) {
    using L = typename decltype(type_tag)::type;
    const L* g = dh.const_data_ptr<L>();
    L* db_out = dbranch.defined() ? dbranch.mutable_data_ptr<L>() : nullptr;
    const bool wide = vec_ok<L>(d, {x_out.const_data_ptr(), dx.const_data_ptr(),
                                    dx_out.defined() ? dx_out.const_data_ptr() : nullptr, weight.const_data_ptr()}) &&
                      aligned_for<L, 4>({g, db_out});
    if (wide) {
      const auto shape = backward_shape<4>(d);
      switch (shape.iter) {
        case 1: return launch(add_norm_backward_kernel<L, 4, 1>, shape, g, db_out);
        case 2: return launch(add_norm_backward_kernel<L, 4, 2>, shape, g, db_out);
        case 4: return launch(add_norm_backward_kernel<L, 4, 4>, shape, g, db_out);
      }
    }
    const auto shape = backward_shape<1>(d);
    switch (shape.iter) {
      case 1: return launch(add_norm_backward_kernel<L, 1, 1>, shape, g, db_out);
      case 2: return launch(add_norm_backward_kernel<L, 1, 2>, shape, g, db_out);
      case 4: return launch(add_norm_backward_kernel<L, 1, 4>, shape, g, db_out);
    }
    TORCH_CHECK(false, "add_norm kernel: no block shape for d = ", d);
  };
  switch (dh.scalar_type()) {  // the compute dtypes; the ATen twin takes any other
    case at::kFloat: run(TypeTag<float>{}); break;
    case at::kBFloat16: run(TypeTag<at::BFloat16>{}); break;
    case at::kHalf: run(TypeTag<at::Half>{}); break;
    default: TORCH_CHECK(false, "add_norm kernel: dh must be float32, bfloat16 or float16, got ", dh.scalar_type());
  }
  dweight.copy_(dw_part.sum(0));
  if (dbias.defined()) dbias.copy_(db_part.sum(0));
}

}  // namespace xsagpt
