// CUDA kernel of kernels/fp8_cast_cuda.h: a thread per VEC consecutive elements
// (16 bytes of bf16 read, 8 written), the float32 product clamped and converted
// with c10's float-to-FP8 conversion, the one ATen's CPU and CUDA casts use, so the
// kernel and the ATen twin in fp8_linear.cpp round alike.
#include "kernels/common.cuh"
#include "kernels/fp8_cast_cuda.h"

#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Float8_e4m3fn.h>
#include <c10/util/Float8_e5m2.h>

namespace xsagpt {

namespace {

using namespace xsagpt::cuda;

template <typename T, typename Q, int VEC>
__global__ void fp8_scale_cast_kernel(const T* __restrict__ x, const float* __restrict__ scale, float top,
                                      Q* __restrict__ q, int64_t n_vec) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_vec) return;
  const float s = *scale;
  const auto in = load_vec<T, VEC>(x + i * VEC);
  Vec<Q, VEC> out;
#pragma unroll
  for (int j = 0; j < VEC; ++j) out.v[j] = Q(fminf(fmaxf(static_cast<float>(in.v[j]) * s, -top), top));
  store_vec<Q, VEC>(q + i * VEC, out);
}

template <typename T, typename Q>
void launch_fp8_cast(const at::Tensor& x, const at::Tensor& scale, float top, at::Tensor& q) {
  constexpr int kVec = 8, kThreads = 256;
  const int64_t n = x.numel();
  const auto* in = x.data_ptr<T>();
  auto* out = reinterpret_cast<Q*>(q.data_ptr());
  auto stream = at::cuda::getCurrentCUDAStream();
  auto run = [&](auto vec) {
    constexpr int V = decltype(vec)::value;
    const int64_t n_vec = n / V;
    fp8_scale_cast_kernel<T, Q, V><<<static_cast<unsigned>((n_vec + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        in, scale.data_ptr<float>(), top, out, n_vec);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  };
  if (n % kVec == 0 && aligned_for<T, kVec>({in}) && aligned_for<Q, kVec>({out}))
    run(std::integral_constant<int, kVec>{});
  else
    run(std::integral_constant<int, 1>{});
}

}  // namespace

void fp8_scale_cast_cuda(const at::Tensor& x, const at::Tensor& scale, double top, at::Tensor& q) {
  TORCH_CHECK(x.is_contiguous() && q.is_contiguous() && x.numel() == q.numel(), "fp8_scale_cast_cuda: bad layout");
  TORCH_CHECK(scale.numel() == 1 && scale.scalar_type() == at::kFloat && scale.device() == x.device(),
              "fp8_scale_cast_cuda: the scale must be one float32 on x's device");
  if (x.numel() == 0) return;
  const c10::cuda::CUDAGuard guard(x.device());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "fp8_scale_cast_cuda", [&] {
    if (q.scalar_type() == at::kFloat8_e4m3fn)
      launch_fp8_cast<scalar_t, c10::Float8_e4m3fn>(x, scale, static_cast<float>(top), q);
    else if (q.scalar_type() == at::kFloat8_e5m2)
      launch_fp8_cast<scalar_t, c10::Float8_e5m2>(x, scale, static_cast<float>(top), q);
    else
      TORCH_CHECK(false, "fp8_scale_cast_cuda: q is ", q.scalar_type(), ", not e4m3fn or e5m2");
  });
}

}  // namespace xsagpt
