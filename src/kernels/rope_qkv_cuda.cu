// CUDA kernels of kernels/rope_qkv.h; see rope_qkv_cuda.h.
//
// One thread handles VEC consecutive pair indices i (0 <= i < D/2) of one
// (batch, position, head): it reads elements i.. and i+D/2.. of q, k and v once,
// rotates q's and k's pairs by the position's angles and writes all three. Forward
// and backward are the same kernel: backward rotates by -angle (sign = -1) and
// swaps the layouts (strided gradients in, the packed qkv gradient out). Each
// tensor is addressed by its (batch, position, head) strides with the last dim
// contiguous, so the projection's output and the attention gradients are read in place.
// The backward can raise the amax of what it writes, the qkv gradient that the qkv
// product's FP8 backward quantizes (kernels/amax_handoff.h).
#include "kernels/common.cuh"
#include "kernels/rope_qkv_cuda.h"

#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

namespace xsagpt {

namespace {

using namespace xsagpt::cuda;

struct Layout {  // element strides of a (B, T, H, D) tensor whose last dim is contiguous
  int64_t b, t, h;
};

struct Shape {
  int64_t B, T, H;
  int half;  // D / 2
};

// The thread's VEC pairs of q, k (rotated) and v (copied), with `top` raised to the
// largest |value| written.
template <typename T, int VEC>
__device__ __forceinline__ void rope_pairs(const T* __restrict__ q_in, const T* __restrict__ k_in,
                                           const T* __restrict__ v_in, Layout qi, Layout ki, Layout vi,
                                           T* __restrict__ q_out, T* __restrict__ k_out, T* __restrict__ v_out,
                                           Layout qo, Layout ko, Layout vo, const float* __restrict__ cos,
                                           const float* __restrict__ sin, Shape s, float sign, int64_t idx,
                                           float& top) {
  using A = at::opmath_type<T>;
  const int n_vec = s.half / VEC;
  const int i = static_cast<int>(idx % n_vec) * VEC;
  int64_t rest = idx / n_vec;
  const int64_t h = rest % s.H;
  rest /= s.H;
  const int64_t t = rest % s.T, b = rest / s.T;

  A c[VEC], sn[VEC];
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    c[j] = static_cast<A>(cos[t * s.half + i + j]);
    sn[j] = sign * static_cast<A>(sin[t * s.half + i + j]);
  }
  auto rotate = [&](const T* in, Layout li, T* out, Layout lo) {
    in += b * li.b + t * li.t + h * li.h + i;
    out += b * lo.b + t * lo.t + h * lo.h + i;
    const auto x1 = load_vec<T, VEC>(in), x2 = load_vec<T, VEC>(in + s.half);
    Vec<T, VEC> y1, y2;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const A a1 = static_cast<A>(x1.v[j]), a2 = static_cast<A>(x2.v[j]);
      y1.v[j] = static_cast<T>(a1 * c[j] - a2 * sn[j]);
      y2.v[j] = static_cast<T>(a2 * c[j] + a1 * sn[j]);
      top = fmaxf(top, fmaxf(fabsf(static_cast<float>(y1.v[j])), fabsf(static_cast<float>(y2.v[j]))));
    }
    store_vec<T, VEC>(out, y1);
    store_vec<T, VEC>(out + s.half, y2);
  };
  rotate(q_in, qi, q_out, qo);
  rotate(k_in, ki, k_out, ko);
  const T* vin = v_in + b * vi.b + t * vi.t + h * vi.h + i;
  T* vout = v_out + b * vo.b + t * vo.t + h * vo.h + i;
  const auto v1 = load_vec<T, VEC>(vin), v2 = load_vec<T, VEC>(vin + s.half);
#pragma unroll
  for (int j = 0; j < VEC; ++j)
    top = fmaxf(top, fmaxf(fabsf(static_cast<float>(v1.v[j])), fabsf(static_cast<float>(v2.v[j]))));
  store_vec<T, VEC>(vout, v1);
  store_vec<T, VEC>(vout + s.half, v2);
}

template <typename T, int VEC>
__global__ void rope_qkv_kernel(const T* __restrict__ q_in, const T* __restrict__ k_in, const T* __restrict__ v_in,
                                Layout qi, Layout ki, Layout vi, T* __restrict__ q_out, T* __restrict__ k_out,
                                T* __restrict__ v_out, Layout qo, Layout ko, Layout vo, const float* __restrict__ cos,
                                const float* __restrict__ sin, Shape s, float sign, float* __restrict__ amax) {
  const int n_vec = s.half / VEC;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  float top = 0;  // max |output| of this thread's elements, as stored
  if (idx < s.B * s.T * s.H * n_vec)
    rope_pairs<T, VEC>(q_in, k_in, v_in, qi, ki, vi, q_out, k_out, v_out, qo, ko, vo, cos, sin, s, sign, idx, top);
  if (amax) {  // every lane of the warp is here, in range or not
    top = warp_max(top);
    if (threadIdx.x % kWarp == 0) atomic_amax(amax, top);
  }
}

Layout layout_of(const at::Tensor& x) {  // x: (B, T, H, D)
  TORCH_CHECK(x.dim() == 4 && x.stride(3) == 1, "rope_qkv kernel: expected (B, T, H, D) with contiguous last dim");
  return {x.stride(0), x.stride(1), x.stride(2)};
}

// (B, T, 3*H*D) packed -> the (B, T, H, D) view of part `which`.
at::Tensor part(const at::Tensor& qkv, int64_t which, int64_t H, int64_t D) {
  return qkv.narrow(-1, which * H * D, H * D).view({qkv.size(0), qkv.size(1), H, D});
}

void launch(const at::Tensor& qi, const at::Tensor& ki, const at::Tensor& vi, at::Tensor qo, at::Tensor ko,
            at::Tensor vo, const at::Tensor& cos, const at::Tensor& sin, float sign, float* amax) {
  TORCH_CHECK(cos.scalar_type() == at::kFloat && sin.scalar_type() == at::kFloat && cos.is_contiguous() &&
                  sin.is_contiguous() && cos.device() == qi.device(),
              "rope_qkv kernel: cos/sin must be contiguous float32 on the tensors' device");
  const c10::cuda::CUDAGuard guard(qi.device());
  const Shape s{qi.size(0), qi.size(1), qi.size(2), static_cast<int>(qi.size(3) / 2)};
  const int64_t pairs = s.B * s.T * s.H * s.half;
  if (pairs == 0) return;
  const std::vector<at::Tensor> all{qi, ki, vi, qo, ko, vo};
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, qi.scalar_type(), "rope_qkv_cuda", [&] {
    constexpr int kVec = 16 / sizeof(scalar_t) < 4 ? 16 / sizeof(scalar_t) : 4;
    bool vec_ok = s.half % kVec == 0;
    for (const auto& x : all) {
      vec_ok = vec_ok && aligned_for<scalar_t, kVec>({x.const_data_ptr()}) && x.stride(0) % kVec == 0 &&
               x.stride(1) % kVec == 0 && x.stride(2) % kVec == 0;
    }
    const int threads = 256;
    auto run = [&](auto vec_tag) {
      constexpr int V = decltype(vec_tag)::value;
      const int64_t n = pairs / V;
      rope_qkv_kernel<scalar_t, V><<<static_cast<unsigned>((n + threads - 1) / threads), threads, 0, stream>>>(
          qi.const_data_ptr<scalar_t>(), ki.const_data_ptr<scalar_t>(), vi.const_data_ptr<scalar_t>(), layout_of(qi),
          layout_of(ki), layout_of(vi), qo.mutable_data_ptr<scalar_t>(), ko.mutable_data_ptr<scalar_t>(),
          vo.mutable_data_ptr<scalar_t>(), layout_of(qo), layout_of(ko), layout_of(vo), cos.const_data_ptr<float>(),
          sin.const_data_ptr<float>(), s, sign, amax);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    };
    if (vec_ok)
      run(std::integral_constant<int, kVec>{});
    else
      run(std::integral_constant<int, 1>{});
  });
}

}  // namespace

void rope_qkv_forward_cuda(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin, at::Tensor& q,
                           at::Tensor& k, at::Tensor& v) {
  const auto H = q.size(2), D = q.size(3);
  launch(part(qkv, 0, H, D), part(qkv, 1, H, D), part(qkv, 2, H, D), q, k, v, cos, sin, 1.0f, nullptr);
}

void rope_qkv_backward_cuda(const at::Tensor& dq, const at::Tensor& dk, const at::Tensor& dv, const at::Tensor& cos,
                            const at::Tensor& sin, at::Tensor& dqkv, at::Tensor& amax) {
  const auto H = dq.size(2), D = dq.size(3);
  TORCH_CHECK(!amax.defined() || (amax.numel() == 1 && amax.scalar_type() == at::kFloat &&
                                  amax.device() == dqkv.device() && amax.is_contiguous()),
              "rope_qkv kernel: amax must be one float32 on ", dqkv.device());
  launch(dq, dk, dv, part(dqkv, 0, H, D), part(dqkv, 1, H, D), part(dqkv, 2, H, D), cos, sin, -1.0f,
         amax.defined() ? amax.mutable_data_ptr<float>() : nullptr);
}

}  // namespace xsagpt
