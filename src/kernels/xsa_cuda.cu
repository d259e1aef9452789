// Fused CUDA kernels for XSA's step; see xsa_cuda.h for what and why.
//
// Layout: a (B, H, T, D) tensor whose last dim is contiguous; its other three
// strides are passed per tensor, so y (a transposed view of flash attention's
// output), v (a strided view into the fused qkv projection) and the gradient are
// read in place. A row (b, h, t) belongs to a group of LANES lanes of one warp
// (32 / LANES rows per warp); lane l of the group handles elements l*VEC.. in steps
// of LANES*VEC, so a group's loads cover consecutive addresses. With `wide`
// (train.kernels "xsa_wide") and every row start 16-byte
// aligned (the usual case), VEC elements move as one 16-byte access
// and LANES is the smallest power of two covering the row (8 lanes for bf16 D = 64),
// which should keep the kernels at memory bandwidth for the paper's head sizes;
// otherwise VEC = 1 and LANES = 32 (one warp per row, element by element: the
// default "xsa"). The row is read
// twice (once for the dot products, once for the outputs); the second read hits L1.
#include "kernels/common.cuh"
#include "kernels/xsa_cuda.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

namespace xsagpt {

namespace {

using cuda::kWarp;
using cuda::load_vec;
using cuda::store_vec;
using cuda::Vec;

constexpr int kWarpsPerBlock = 8;

struct Rows {
  int64_t n, H, T;  // n = B * H * T
  int D;
};

// Element offset of row (b, h, t) of one tensor.
struct RowStrides {
  int64_t b, h, t;
  __device__ int64_t offset(int64_t row, const Rows& r) const {
    const int64_t t_ = row % r.T, bh = row / r.T;
    return (bh / r.H) * b + (bh % r.H) * h + t_ * t;
  }
};

RowStrides strides_of(const at::Tensor& x) { return {x.stride(0), x.stride(1), x.stride(2)}; }

// Sum over the LANES lanes of a row's group (xor offsets below LANES stay inside it).
template <int LANES, typename Acc>
__device__ __forceinline__ Acc group_sum(Acc x) {
  for (int o = LANES / 2; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// The row this lane's group handles; every lane of the warp exists (the shuffles
// need all 32), rows past the end compute on nothing and store nothing.
template <int LANES>
__device__ __forceinline__ int64_t row_of_lane() {
  constexpr int kRowsPerWarp = kWarp / LANES;
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  return warp * kRowsPerWarp + (threadIdx.x % kWarp) / LANES;
}

template <typename T, typename Acc, int VEC, int LANES>
__global__ void xsa_forward_kernel(const T* __restrict__ y, const T* __restrict__ v, T* __restrict__ z,
                                   const float* __restrict__ gate, Rows r, RowStrides ys, RowStrides vs, RowStrides zs,
                                   Acc eps2) {
  const int64_t row = row_of_lane<LANES>();
  const bool live = row < r.n;
  const int lane = threadIdx.x % LANES;
  const T* yr = y + (live ? ys.offset(row, r) : 0);
  const T* vr = v + (live ? vs.offset(row, r) : 0);
  Acc yv = 0, vv = 0;
  if (live)
    for (int d = lane * VEC; d < r.D; d += LANES * VEC) {
      const auto yd = load_vec<T, VEC>(yr + d), vd = load_vec<T, VEC>(vr + d);
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        yv += static_cast<Acc>(yd.v[j]) * static_cast<Acc>(vd.v[j]);
        vv += static_cast<Acc>(vd.v[j]) * static_cast<Acc>(vd.v[j]);
      }
    }
  yv = group_sum<LANES>(yv);
  vv = group_sum<LANES>(vv);
  if (!live) return;
  Acc p = yv / max(vv, eps2);
  if (gate) p *= static_cast<Acc>(gate[(row / r.T) % r.H]);
  T* zr = z + zs.offset(row, r);
  for (int d = lane * VEC; d < r.D; d += LANES * VEC) {
    const auto yd = load_vec<T, VEC>(yr + d), vd = load_vec<T, VEC>(vr + d);
    Vec<T, VEC> out;
#pragma unroll
    for (int j = 0; j < VEC; ++j) out.v[j] = static_cast<T>(static_cast<Acc>(yd.v[j]) - p * static_cast<Acc>(vd.v[j]));
    store_vec<T, VEC>(zr + d, out);
  }
}

template <typename T, typename Acc, int VEC, int LANES>
__global__ void xsa_backward_kernel(const T* __restrict__ y, const T* __restrict__ v, const T* __restrict__ g,
                                    T* __restrict__ dy, T* __restrict__ dv, float* __restrict__ dgate_rows,
                                    const float* __restrict__ gate, Rows r, RowStrides ys, RowStrides vs, RowStrides gs,
                                    RowStrides dys, RowStrides dvs, Acc eps2) {
  const int64_t row = row_of_lane<LANES>();
  const bool live = row < r.n;
  const int lane = threadIdx.x % LANES;
  const T* yr = y + (live ? ys.offset(row, r) : 0);
  const T* vr = v + (live ? vs.offset(row, r) : 0);
  const T* gr = g + (live ? gs.offset(row, r) : 0);
  Acc yv = 0, vv = 0, gv = 0;
  if (live)
    for (int d = lane * VEC; d < r.D; d += LANES * VEC) {
      const auto yd = load_vec<T, VEC>(yr + d), vd = load_vec<T, VEC>(vr + d), gd = load_vec<T, VEC>(gr + d);
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const Acc vj = static_cast<Acc>(vd.v[j]);
        yv += static_cast<Acc>(yd.v[j]) * vj;
        vv += vj * vj;
        gv += static_cast<Acc>(gd.v[j]) * vj;
      }
    }
  yv = group_sum<LANES>(yv);
  vv = group_sum<LANES>(vv);
  gv = group_sum<LANES>(gv);
  if (!live) return;
  const Acc n2 = max(vv, eps2);
  const Acc p = yv / n2, q = gv / n2;
  const Acc gt = gate ? static_cast<Acc>(gate[(row / r.T) % r.H]) : Acc(1);
  const Acc gp = gt * p, gq = gt * q;
  const Acc radial = vv >= eps2 ? 2 * gp * q : Acc(0);  // below eps, n is the constant eps
  T* dyr = dy + dys.offset(row, r);
  T* dvr = dv + dvs.offset(row, r);
  for (int d = lane * VEC; d < r.D; d += LANES * VEC) {
    const auto yd = load_vec<T, VEC>(yr + d), vd = load_vec<T, VEC>(vr + d), gd = load_vec<T, VEC>(gr + d);
    Vec<T, VEC> oy, ov;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const Acc yj = static_cast<Acc>(yd.v[j]), vj = static_cast<Acc>(vd.v[j]), gj = static_cast<Acc>(gd.v[j]);
      oy.v[j] = static_cast<T>(gj - gq * vj);
      ov.v[j] = static_cast<T>(radial * vj - gq * yj - gp * gj);
    }
    store_vec<T, VEC>(dyr + d, oy);
    store_vec<T, VEC>(dvr + d, ov);
  }
  if (dgate_rows && lane == 0) dgate_rows[row] = static_cast<float>(-p * q * n2);
}

void check_inputs(const at::Tensor& y, const at::Tensor& v, const at::Tensor& gate) {
  TORCH_CHECK(y.is_cuda() && v.is_cuda() && y.device() == v.device(), "XSA kernel: y and v must be on one CUDA device");
  TORCH_CHECK(y.dim() == 4 && y.sizes() == v.sizes(), "XSA kernel: y and v must be (B, H, T, D) of one shape, got ",
              y.sizes(), " and ", v.sizes());
  TORCH_CHECK(y.scalar_type() == v.scalar_type(), "XSA kernel: y and v must have one dtype");
  TORCH_CHECK(!gate.defined() || (gate.scalar_type() == at::kFloat && gate.numel() == y.size(1) &&
                                  gate.is_contiguous() && gate.device() == y.device()),
              "XSA kernel: the gate must be float32 with one contiguous element per head");
}

// The last dim contiguous, as the kernels index it; other strides are free.
at::Tensor rows_contiguous(const at::Tensor& x) { return x.stride(-1) == 1 ? x : x.contiguous(); }

Rows rows_of(const at::Tensor& y) {
  return {y.size(0) * y.size(1) * y.size(2), y.size(1), y.size(2), static_cast<int>(y.size(3))};
}

template <int LANES>
dim3 grid_for(const Rows& r) {
  constexpr int64_t kRowsPerBlock = kWarpsPerBlock * (kWarp / LANES);
  return dim3(static_cast<unsigned>((r.n + kRowsPerBlock - 1) / kRowsPerBlock));
}

// Calls f(VEC, LANES) as integral constants: with `wide`, 16-byte accesses and the
// fewest lanes that cover a row when every tensor's rows start 16-byte aligned;
// otherwise one element at a time over a whole warp.
template <typename T, typename F>
void with_layout(bool wide, int D, std::initializer_list<const at::Tensor*> tensors, F&& f) {
  constexpr int kVec = 16 / sizeof(T) < 1 ? 1 : 16 / sizeof(T);
  using std::integral_constant;
  wide = wide && D % kVec == 0;
  for (const auto* t : tensors)
    wide = wide && cuda::aligned_for<T, kVec>({t->const_data_ptr()}) && t->stride(0) % kVec == 0 &&
           t->stride(1) % kVec == 0 && t->stride(2) % kVec == 0;
  if (!wide) return f(integral_constant<int, 1>{}, integral_constant<int, kWarp>{});
  const int lanes = D / kVec;
  if (lanes <= 4) return f(integral_constant<int, kVec>{}, integral_constant<int, 4>{});
  if (lanes <= 8) return f(integral_constant<int, kVec>{}, integral_constant<int, 8>{});
  if (lanes <= 16) return f(integral_constant<int, kVec>{}, integral_constant<int, 16>{});
  return f(integral_constant<int, kVec>{}, integral_constant<int, kWarp>{});
}

}  // namespace

at::Tensor xsa_forward_cuda(const at::Tensor& y_in, const at::Tensor& v_in, const at::Tensor& gate, double eps,
                            bool wide) {
  check_inputs(y_in, v_in, gate);
  const c10::cuda::CUDAGuard guard(y_in.device());
  const auto y = rows_contiguous(y_in), v = rows_contiguous(v_in);
  auto z = at::empty_like(y);  // y's strides (dense y), so z can be transposed back without a copy
  const Rows r = rows_of(y);
  if (r.n == 0) return z;
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, y.scalar_type(), "xsa_forward_cuda", [&] {
    using Acc = at::opmath_type<scalar_t>;
    with_layout<scalar_t>(wide, r.D, {&y, &v, &z}, [&](auto vec, auto lanes) {
      constexpr int VEC = decltype(vec)::value, LANES = decltype(lanes)::value;
      xsa_forward_kernel<scalar_t, Acc, VEC, LANES><<<grid_for<LANES>(r), kWarp * kWarpsPerBlock, 0, stream>>>(
          y.const_data_ptr<scalar_t>(), v.const_data_ptr<scalar_t>(), z.mutable_data_ptr<scalar_t>(),
          gate.defined() ? gate.const_data_ptr<float>() : nullptr, r, strides_of(y), strides_of(v), strides_of(z),
          static_cast<Acc>(eps * eps));
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
  return z;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> xsa_backward_cuda(const at::Tensor& y_in, const at::Tensor& v_in,
                                                                 const at::Tensor& g_in, const at::Tensor& gate,
                                                                 double eps, bool wide) {
  check_inputs(y_in, v_in, gate);
  TORCH_CHECK(g_in.sizes() == y_in.sizes() && g_in.device() == y_in.device(), "XSA kernel: grad_z must match y");
  const c10::cuda::CUDAGuard guard(y_in.device());
  const auto y = rows_contiguous(y_in), v = rows_contiguous(v_in);
  const auto g = rows_contiguous(g_in.to(y.scalar_type()));
  auto dy = at::empty_like(g), dv = at::empty_like(v);
  const Rows r = rows_of(y);
  at::Tensor dgate_rows;
  if (gate.defined()) dgate_rows = at::empty({y.size(0), y.size(1), y.size(2)}, y.options().dtype(at::kFloat));
  if (r.n == 0) return {dy, dv, gate.defined() ? dgate_rows.zero_() : dgate_rows};
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, y.scalar_type(), "xsa_backward_cuda", [&] {
    using Acc = at::opmath_type<scalar_t>;
    with_layout<scalar_t>(wide, r.D, {&y, &v, &g, &dy, &dv}, [&](auto vec, auto lanes) {
      constexpr int VEC = decltype(vec)::value, LANES = decltype(lanes)::value;
      xsa_backward_kernel<scalar_t, Acc, VEC, LANES><<<grid_for<LANES>(r), kWarp * kWarpsPerBlock, 0, stream>>>(
          y.const_data_ptr<scalar_t>(), v.const_data_ptr<scalar_t>(), g.const_data_ptr<scalar_t>(),
          dy.mutable_data_ptr<scalar_t>(), dv.mutable_data_ptr<scalar_t>(),
          gate.defined() ? dgate_rows.mutable_data_ptr<float>() : nullptr,
          gate.defined() ? gate.const_data_ptr<float>() : nullptr, r, strides_of(y), strides_of(v), strides_of(g),
          strides_of(dy), strides_of(dv), static_cast<Acc>(eps * eps));
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
  return {dy, dv, dgate_rows};
}

}  // namespace xsagpt
