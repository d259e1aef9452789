// CUDA kernels of kernels/add_norm.h; see add_norm_cuda.h.
//
// Forward: one warp per row, VEC elements per load. The row is read three times
// (sum, then squared deviations, then the output), the second and third time
// from cache: two-pass variance, no cancellation.
// Backward: one warp per row as well; each warp walks a contiguous range of rows
// and keeps its partial sums of dh * xhat (weight) and dh (bias) in shared memory,
// one slot per column, each lane owning its own columns. At the end every warp
// writes its partials to a (warps, d) buffer that one ATen sum reduces: a fixed
// order of additions, so the weight gradient is the same on every run.
#include "kernels/add_norm_cuda.h"
#include "kernels/common.cuh"

#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <mutex>
#include <set>
#include <utility>

namespace xsagpt {

namespace {

using namespace xsagpt::cuda;

constexpr int kFwdWarps = 8;  // rows per forward block

// B: the branch's dtype, float32 or L; either way it is added in float32.
template <typename L, typename B, int VEC>
__global__ void add_norm_forward_kernel(const float* __restrict__ x, const B* __restrict__ branch,
                                        const float* __restrict__ weight, const float* __restrict__ bias, float* x_out,
                                        L* __restrict__ h, float* __restrict__ mean, float* __restrict__ rstd,
                                        int64_t N, int d, float eps) {
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
  for (int c = lane * VEC; c < d; c += kWarp * VEC) {
    const auto v = load_vec<float, VEC>(src + c);
    const auto w = load_vec<float, VEC>(weight + c);
    Vec<L, VEC> out;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float b = bias ? bias[c + j] : 0.0f;
      out.v[j] = static_cast<L>((v.v[j] - mu) * rs * w.v[j] + b);
    }
    store_vec<L, VEC>(h + row * d + c, out);
  }
  if (lane == 0) {
    mean[row] = mu;
    rstd[row] = rs;
  }
}

template <typename L, int VEC>
__global__ void add_norm_backward_kernel(const L* __restrict__ dh, const float* __restrict__ dx_out,
                                         const float* __restrict__ x_out, const float* __restrict__ mean,
                                         const float* __restrict__ rstd, const float* __restrict__ weight,
                                         float* __restrict__ dx, L* __restrict__ dbranch, float* __restrict__ dw_part,
                                         float* __restrict__ db_part, int64_t N, int d, int64_t rows_per_warp) {
  extern __shared__ float partial[];  // per warp: d weight sums, then d bias sums
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  float* sw = partial + static_cast<int64_t>(warp) * 2 * d;
  float* sb = sw + d;
  for (int c = lane * VEC; c < d; c += kWarp * VEC)
#pragma unroll
    for (int j = 0; j < VEC; ++j) sw[c + j] = sb[c + j] = 0.0f;

  const int64_t gw = static_cast<int64_t>(blockIdx.x) * (blockDim.x / kWarp) + warp;
  const int64_t r0 = gw * rows_per_warp, r1 = min(N, r0 + rows_per_warp);
  for (int64_t row = r0; row < r1; ++row) {
    const float mu = mean[row], rs = rstd[row];
    const float* xr = x_out + row * d;
    const L* gr = dh + row * d;
    float s1 = 0, s2 = 0;  // sum of dh*w, and of dh*w*xhat
    for (int c = lane * VEC; c < d; c += kWarp * VEC) {
      const auto xv = load_vec<float, VEC>(xr + c);
      const auto gv = load_vec<L, VEC>(gr + c);
      const auto wv = load_vec<float, VEC>(weight + c);
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const float xhat = (xv.v[j] - mu) * rs, g = static_cast<float>(gv.v[j]);
        s1 += g * wv.v[j];
        s2 += g * wv.v[j] * xhat;
        sw[c + j] += g * xhat;
        sb[c + j] += g;
      }
    }
    s1 = warp_sum(s1) / d;
    s2 = warp_sum(s2) / d;
    for (int c = lane * VEC; c < d; c += kWarp * VEC) {
      const auto xv = load_vec<float, VEC>(xr + c);
      const auto gv = load_vec<L, VEC>(gr + c);
      const auto wv = load_vec<float, VEC>(weight + c);
      Vec<float, VEC> out;
      Vec<L, VEC> out_low;
      const auto next = dx_out ? load_vec<float, VEC>(dx_out + row * d + c) : Vec<float, VEC>{};
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const float xhat = (xv.v[j] - mu) * rs;
        out.v[j] = rs * (static_cast<float>(gv.v[j]) * wv.v[j] - s1 - xhat * s2) + (dx_out ? next.v[j] : 0.0f);
        out_low.v[j] = static_cast<L>(out.v[j]);
      }
      store_vec<float, VEC>(dx + row * d + c, out);
      if (dbranch) store_vec<L, VEC>(dbranch + row * d + c, out_low);
    }
  }
  for (int c = lane * VEC; c < d; c += kWarp * VEC)
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      dw_part[gw * d + c + j] = sw[c + j];
      if (db_part) db_part[gw * d + c + j] = sb[c + j];
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

// Shared memory the backward needs per warp: a weight and a bias partial per column.
int64_t backward_smem_per_warp(int64_t d) { return 2 * d * static_cast<int64_t>(sizeof(float)); }

// Lets `kernel` use the device's opt-in shared memory: once per kernel and device
// (the attribute stays set), not on every launch.
void allow_large_smem(const void* kernel, int device, int bytes) {
  static std::mutex m;
  static std::set<std::pair<const void*, int>> done;
  const std::lock_guard<std::mutex> lock(m);
  if (!done.insert({kernel, device}).second) return;
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
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
                           at::Tensor& rstd) {
  TORCH_CHECK(x.dim() == 2, "add_norm kernel: x must be (N, d), got ", x.sizes());
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
    auto run = [&](auto vec_tag, auto branch_tag) {
      constexpr int V = decltype(vec_tag)::value;
      using B = typename decltype(branch_tag)::type;
      add_norm_forward_kernel<L, B, V><<<grid, block, 0, stream>>>(
          x.const_data_ptr<float>(), branch.defined() ? branch.const_data_ptr<B>() : nullptr,
          weight.const_data_ptr<float>(), bias.defined() ? bias.const_data_ptr<float>() : nullptr,
          branch.defined() ? x_out.mutable_data_ptr<float>() : nullptr, h.mutable_data_ptr<L>(),
          mean.mutable_data_ptr<float>(), rstd.mutable_data_ptr<float>(), N, static_cast<int>(d),
          static_cast<float>(eps));
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    };
    auto with_branch_type = [&](auto vec_tag) {
      if (branch.defined() && branch.scalar_type() == at::kFloat)
        run(vec_tag, TypeTag<float>{});
      else
        run(vec_tag, TypeTag<L>{});
    };
    if (wide)
      with_branch_type(std::integral_constant<int, 4>{});
    else
      with_branch_type(std::integral_constant<int, 1>{});
  });
}

bool add_norm_backward_cuda_fits(int64_t d) {
  return backward_smem_per_warp(d) <=
         static_cast<int64_t>(at::cuda::getCurrentDeviceProperties()->sharedMemPerBlockOptin);
}

void add_norm_backward_cuda(const at::Tensor& dh, const at::Tensor& dx_out, const at::Tensor& x_out,
                            const at::Tensor& mean, const at::Tensor& rstd, const at::Tensor& weight, at::Tensor& dx,
                            at::Tensor& dbranch, at::Tensor& dweight, at::Tensor& dbias) {
  TORCH_CHECK(x_out.dim() == 2, "add_norm kernel: x_out must be (N, d), got ", x_out.sizes());
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
  const c10::cuda::CUDAGuard guard(x_out.device());
  const auto* prop = at::cuda::getCurrentDeviceProperties();
  const int64_t per_warp = backward_smem_per_warp(d);
  const int64_t max_smem = static_cast<int64_t>(prop->sharedMemPerBlockOptin);
  TORCH_CHECK(per_warp <= max_smem, "add_norm kernel: d = ", d, " needs ", per_warp,
              " bytes of shared memory per warp; the device has ", max_smem,
              " (add_norm_backward_cuda_fits(d) is false: use the ATen twin)");
  const int warps = static_cast<int>(std::min<int64_t>(4, max_smem / per_warp));
  const int64_t blocks = std::max<int64_t>(
      1, std::min<int64_t>((N + warps - 1) / warps, 2 * static_cast<int64_t>(prop->multiProcessorCount)));
  const int64_t total_warps = blocks * warps;
  const int64_t rows_per_warp = (N + total_warps - 1) / total_warps;
  auto dw_part = at::empty({total_warps, d}, x_out.options());
  auto db_part = dbias.defined() ? at::empty({total_warps, d}, x_out.options()) : at::Tensor();
  const size_t smem = static_cast<size_t>(warps * per_warp);
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dh.scalar_type(), "add_norm_backward_cuda", [&] {
    using L = scalar_t;
    const bool wide = vec_ok<L>(d, {x_out.const_data_ptr(), dx.const_data_ptr(),
                                    dx_out.defined() ? dx_out.const_data_ptr() : nullptr, weight.const_data_ptr()}) &&
                      aligned_for<L, 4>({dh.const_data_ptr(), dbranch.defined() ? dbranch.const_data_ptr() : nullptr});
    auto run = [&](auto vec_tag) {
      constexpr int V = decltype(vec_tag)::value;
      auto kernel = add_norm_backward_kernel<L, V>;
      if (smem > 48 * 1024)
        allow_large_smem(reinterpret_cast<const void*>(kernel), x_out.get_device(), static_cast<int>(max_smem));
      kernel<<<static_cast<unsigned>(blocks), warps * kWarp, smem, stream>>>(
          dh.const_data_ptr<L>(), dx_out.defined() ? dx_out.const_data_ptr<float>() : nullptr,
          x_out.const_data_ptr<float>(), mean.const_data_ptr<float>(), rstd.const_data_ptr<float>(),
          weight.const_data_ptr<float>(), dx.mutable_data_ptr<float>(),
          dbranch.defined() ? dbranch.mutable_data_ptr<L>() : nullptr, dw_part.mutable_data_ptr<float>(),
          dbias.defined() ? db_part.mutable_data_ptr<float>() : nullptr, N, static_cast<int>(d), rows_per_warp);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    };
    if (wide)
      run(std::integral_constant<int, 4>{});
    else
      run(std::integral_constant<int, 1>{});
  });
  dweight.copy_(dw_part.sum(0));
  if (dbias.defined()) dbias.copy_(db_part.sum(0));
}

}  // namespace xsagpt
