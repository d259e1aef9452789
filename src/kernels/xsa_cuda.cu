// Fused CUDA kernels for XSA's step; see xsa_cuda.h for what and why.
//
// Layout: a (B, H, T, D) tensor whose last dim is contiguous; its other three
// strides are passed per tensor, so y (a transposed view of flash attention's
// output), v (a strided view into the fused qkv projection) and the gradient are
// read in place. One warp per row (b, h, t): lane l handles elements l, l+32, ...,
// so each load instruction of a warp covers consecutive addresses. The row is
// read twice (once for the dot products, once for the outputs); the second read
// hits L1, as one row is at most a few hundred bytes.
#include "kernels/xsa_cuda.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>

namespace xsagpt {

namespace {

constexpr int kWarp = 32;
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

RowStrides strides_of(const torch::Tensor& x) { return {x.stride(0), x.stride(1), x.stride(2)}; }

template <typename Acc>
__device__ Acc warp_sum(Acc x) {
  for (int o = kWarp / 2; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

template <typename T, typename Acc>
__global__ void xsa_forward_kernel(const T* __restrict__ y, const T* __restrict__ v, T* __restrict__ z,
                                   const float* __restrict__ gate, Rows r, RowStrides ys, RowStrides vs,
                                   RowStrides zs, Acc eps2) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (row >= r.n) return;  // whole warps leave together: the shuffles below see all 32 lanes
  const int lane = threadIdx.x % kWarp;
  const T* yr = y + ys.offset(row, r);
  const T* vr = v + vs.offset(row, r);
  T* zr = z + zs.offset(row, r);
  Acc yv = 0, vv = 0;
  for (int d = lane; d < r.D; d += kWarp) {
    const Acc yd = static_cast<Acc>(yr[d]), vd = static_cast<Acc>(vr[d]);
    yv += yd * vd;
    vv += vd * vd;
  }
  yv = warp_sum(yv);
  vv = warp_sum(vv);
  Acc p = yv / max(vv, eps2);
  if (gate) p *= static_cast<Acc>(gate[(row / r.T) % r.H]);
  for (int d = lane; d < r.D; d += kWarp)
    zr[d] = static_cast<T>(static_cast<Acc>(yr[d]) - p * static_cast<Acc>(vr[d]));
}

template <typename T, typename Acc>
__global__ void xsa_backward_kernel(const T* __restrict__ y, const T* __restrict__ v, const T* __restrict__ g,
                                    T* __restrict__ dy, T* __restrict__ dv, float* __restrict__ dgate_rows,
                                    const float* __restrict__ gate, Rows r, RowStrides ys, RowStrides vs,
                                    RowStrides gs, RowStrides dys, RowStrides dvs, Acc eps2) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (row >= r.n) return;
  const int lane = threadIdx.x % kWarp;
  const T* yr = y + ys.offset(row, r);
  const T* vr = v + vs.offset(row, r);
  const T* gr = g + gs.offset(row, r);
  T* dyr = dy + dys.offset(row, r);
  T* dvr = dv + dvs.offset(row, r);
  Acc yv = 0, vv = 0, gv = 0;
  for (int d = lane; d < r.D; d += kWarp) {
    const Acc yd = static_cast<Acc>(yr[d]), vd = static_cast<Acc>(vr[d]), gd = static_cast<Acc>(gr[d]);
    yv += yd * vd;
    vv += vd * vd;
    gv += gd * vd;
  }
  yv = warp_sum(yv);
  vv = warp_sum(vv);
  gv = warp_sum(gv);
  const Acc n2 = max(vv, eps2);
  const Acc p = yv / n2, q = gv / n2;
  const Acc gt = gate ? static_cast<Acc>(gate[(row / r.T) % r.H]) : Acc(1);
  const Acc gp = gt * p, gq = gt * q;
  const Acc radial = vv >= eps2 ? 2 * gp * q : Acc(0);  // below eps, n is the constant eps
  for (int d = lane; d < r.D; d += kWarp) {
    const Acc yd = static_cast<Acc>(yr[d]), vd = static_cast<Acc>(vr[d]), gd = static_cast<Acc>(gr[d]);
    dyr[d] = static_cast<T>(gd - gq * vd);
    dvr[d] = static_cast<T>(radial * vd - gq * yd - gp * gd);
  }
  if (dgate_rows && lane == 0) dgate_rows[row] = static_cast<float>(-p * q * n2);
}

void check_inputs(const torch::Tensor& y, const torch::Tensor& v, const torch::Tensor& gate) {
  TORCH_CHECK(y.is_cuda() && v.is_cuda() && y.device() == v.device(), "XSA kernel: y and v must be on one CUDA device");
  TORCH_CHECK(y.dim() == 4 && y.sizes() == v.sizes(), "XSA kernel: y and v must be (B, H, T, D) of one shape, got ",
              y.sizes(), " and ", v.sizes());
  TORCH_CHECK(y.scalar_type() == v.scalar_type(), "XSA kernel: y and v must have one dtype");
  TORCH_CHECK(!gate.defined() || (gate.scalar_type() == torch::kFloat32 && gate.numel() == y.size(1) &&
                                  gate.is_contiguous() && gate.device() == y.device()),
              "XSA kernel: the gate must be float32 with one contiguous element per head");
}

// The last dim contiguous, as the kernels index it; other strides are free.
torch::Tensor rows_contiguous(const torch::Tensor& x) { return x.stride(-1) == 1 ? x : x.contiguous(); }

Rows rows_of(const torch::Tensor& y) {
  return {y.size(0) * y.size(1) * y.size(2), y.size(1), y.size(2), static_cast<int>(y.size(3))};
}

dim3 grid_for(const Rows& r) { return dim3(static_cast<unsigned>((r.n + kWarpsPerBlock - 1) / kWarpsPerBlock)); }

}  // namespace

torch::Tensor xsa_forward_cuda(const torch::Tensor& y_in, const torch::Tensor& v_in, const torch::Tensor& gate,
                               double eps) {
  check_inputs(y_in, v_in, gate);
  const c10::cuda::CUDAGuard guard(y_in.device());
  const auto y = rows_contiguous(y_in), v = rows_contiguous(v_in);
  auto z = torch::empty_like(y);  // y's strides (dense y), so z can be transposed back without a copy
  const Rows r = rows_of(y);
  if (r.n == 0) return z;
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, y.scalar_type(), "xsa_forward_cuda", [&] {
    using Acc = at::opmath_type<scalar_t>;
    xsa_forward_kernel<scalar_t, Acc><<<grid_for(r), kWarp * kWarpsPerBlock, 0, stream>>>(
        y.const_data_ptr<scalar_t>(), v.const_data_ptr<scalar_t>(), z.mutable_data_ptr<scalar_t>(),
        gate.defined() ? gate.const_data_ptr<float>() : nullptr, r, strides_of(y), strides_of(v), strides_of(z),
        static_cast<Acc>(eps * eps));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return z;
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> xsa_backward_cuda(const torch::Tensor& y_in,
                                                                          const torch::Tensor& v_in,
                                                                          const torch::Tensor& g_in,
                                                                          const torch::Tensor& gate, double eps) {
  check_inputs(y_in, v_in, gate);
  TORCH_CHECK(g_in.sizes() == y_in.sizes() && g_in.device() == y_in.device(), "XSA kernel: grad_z must match y");
  const c10::cuda::CUDAGuard guard(y_in.device());
  const auto y = rows_contiguous(y_in), v = rows_contiguous(v_in);
  const auto g = rows_contiguous(g_in.to(y.scalar_type()));
  auto dy = torch::empty_like(g), dv = torch::empty_like(v);
  const Rows r = rows_of(y);
  torch::Tensor dgate_rows;
  if (gate.defined()) dgate_rows = torch::empty({y.size(0), y.size(1), y.size(2)}, y.options().dtype(torch::kFloat32));
  if (r.n == 0) return {dy, dv, gate.defined() ? dgate_rows.zero_() : dgate_rows};
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, y.scalar_type(), "xsa_backward_cuda", [&] {
    using Acc = at::opmath_type<scalar_t>;
    xsa_backward_kernel<scalar_t, Acc><<<grid_for(r), kWarp * kWarpsPerBlock, 0, stream>>>(
        y.const_data_ptr<scalar_t>(), v.const_data_ptr<scalar_t>(), g.const_data_ptr<scalar_t>(),
        dy.mutable_data_ptr<scalar_t>(), dv.mutable_data_ptr<scalar_t>(),
        gate.defined() ? dgate_rows.mutable_data_ptr<float>() : nullptr,
        gate.defined() ? gate.const_data_ptr<float>() : nullptr, r, strides_of(y), strides_of(v), strides_of(g),
        strides_of(dy), strides_of(dv), static_cast<Acc>(eps * eps));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return {dy, dv, dgate_rows};
}

}  // namespace xsagpt
