// CUDA kernel of kernels/gelu_amax_cuda.h: a thread per VEC consecutive elements
// (16 bytes of bf16 read, 16 written), the GELU in float32 as ATen's kernel writes
// it, and each warp's max |h| raised into the one amax (common.cuh's atomic_amax).
#include "kernels/common.cuh"
#include "kernels/gelu_amax_cuda.h"

#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <cmath>

namespace xsagpt {

namespace {

using namespace xsagpt::cuda;

template <typename T, int VEC>
__global__ void gelu_amax_kernel(const T* __restrict__ x, T* __restrict__ h, float* __restrict__ amax,
                                 int64_t n_vec) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  float top = 0;
  if (i < n_vec) {
    constexpr float kAlpha = M_SQRT1_2;
    const auto in = load_vec<T, VEC>(x + i * VEC);
    Vec<T, VEC> out;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float v = static_cast<float>(in.v[j]);
      out.v[j] = static_cast<T>(v * 0.5f * (1.0f + erff(v * kAlpha)));
      top = fmaxf(top, fabsf(static_cast<float>(out.v[j])));
    }
    store_vec<T, VEC>(h + i * VEC, out);
  }
  top = warp_max(top);  // every lane of the warp is here, in range or not
  if (threadIdx.x % kWarp == 0) atomic_amax(amax, top);
}

template <typename T>
void launch(const at::Tensor& x, at::Tensor& h, at::Tensor& amax) {
  constexpr int kVec = 8, kThreads = 256;
  const int64_t n = x.numel();
  const auto* in = x.const_data_ptr<T>();
  auto* out = h.mutable_data_ptr<T>();
  auto stream = at::cuda::getCurrentCUDAStream();
  auto run = [&](auto vec) {
    constexpr int V = decltype(vec)::value;
    const int64_t n_vec = n / V;
    gelu_amax_kernel<T, V><<<static_cast<unsigned>((n_vec + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        in, out, amax.mutable_data_ptr<float>(), n_vec);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  };
  if (n % kVec == 0 && aligned_for<T, kVec>({in, out}))
    run(std::integral_constant<int, kVec>{});
  else
    run(std::integral_constant<int, 1>{});
}

}  // namespace

void gelu_amax_cuda(const at::Tensor& x, at::Tensor& h, at::Tensor& amax) {
  TORCH_CHECK(x.is_contiguous() && h.is_contiguous() && x.sizes() == h.sizes() &&
                  x.scalar_type() == h.scalar_type() && h.device() == x.device(),
              "gelu_amax_cuda: x and h must be contiguous, of one size, dtype and device");
  TORCH_CHECK(amax.numel() == 1 && amax.scalar_type() == at::kFloat && amax.device() == x.device() &&
                  amax.is_contiguous(),
              "gelu_amax_cuda: amax must be one float32 on ", x.device());
  if (x.numel() == 0) return;
  const c10::cuda::CUDAGuard guard(x.device());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "gelu_amax_cuda",
                                  [&] { launch<scalar_t>(x, h, amax); });
}

}  // namespace xsagpt
