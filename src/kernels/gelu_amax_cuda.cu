// CUDA kernels of kernels/gelu_amax_cuda.h: a thread per VEC consecutive elements
// (16 bytes of bf16 read per operand, 16 written), GELU and its derivative in
// float32 as ATen's kernels write them, and each warp's max |written value| raised
// into the one amax (common.cuh's atomic_amax).
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

constexpr float kAlpha = M_SQRT1_2;
constexpr float kBeta = M_2_SQRTPI * M_SQRT1_2 * 0.5f;  // 1 / sqrt(2 pi), rounded as ATen rounds it

struct GeluOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T x, T) const {
    const float v = static_cast<float>(x);
    return static_cast<T>(v * 0.5f * (1.0f + erff(v * kAlpha)));
  }
};

struct GeluBackwardOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T x, T dy) const {
    const float v = static_cast<float>(x);
    const float cdf = 0.5f * (1.0f + erff(v * kAlpha));
    const float pdf = expf(-0.5f * v * v) * kBeta;
    return static_cast<T>(static_cast<float>(dy) * (cdf + v * pdf));
  }
};

// out = op(x, dy) elementwise (dy unused by the forward), with max |out| into amax.
template <typename Op, typename T, int VEC>
__global__ void gelu_amax_kernel(const T* __restrict__ x, const T* __restrict__ dy, T* __restrict__ out,
                                 float* __restrict__ amax, int64_t n_vec) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  float top = 0;
  if (i < n_vec) {
    const auto in = load_vec<T, VEC>(x + i * VEC);
    const auto g = dy ? load_vec<T, VEC>(dy + i * VEC) : Vec<T, VEC>{};
    Vec<T, VEC> o;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      o.v[j] = Op{}(in.v[j], g.v[j]);
      top = fmaxf(top, fabsf(static_cast<float>(o.v[j])));
    }
    store_vec<T, VEC>(out + i * VEC, o);
  }
  if (amax) {  // every lane of the warp is here, in range or not
    top = warp_max(top);
    if (threadIdx.x % kWarp == 0) atomic_amax(amax, top);
  }
}

template <typename Op, typename T>
void launch(const at::Tensor& x, const at::Tensor& dy, at::Tensor& out, at::Tensor& amax) {
  constexpr int kVec = 8, kThreads = 256;
  const int64_t n = x.numel();
  const auto* in = x.const_data_ptr<T>();
  const T* g = dy.defined() ? dy.const_data_ptr<T>() : nullptr;
  auto* o = out.mutable_data_ptr<T>();
  auto stream = at::cuda::getCurrentCUDAStream();
  auto run = [&](auto vec) {
    constexpr int V = decltype(vec)::value;
    const int64_t n_vec = n / V;
    gelu_amax_kernel<Op, T, V><<<static_cast<unsigned>((n_vec + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        in, g, o, amax.defined() ? amax.mutable_data_ptr<float>() : nullptr, n_vec);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  };
  if (n % kVec == 0 && aligned_for<T, kVec>({in, g, o}))
    run(std::integral_constant<int, kVec>{});
  else
    run(std::integral_constant<int, 1>{});
}

void check(const at::Tensor& x, const at::Tensor& t, const char* what) {
  TORCH_CHECK(
      t.is_contiguous() && t.sizes() == x.sizes() && t.scalar_type() == x.scalar_type() && t.device() == x.device(),
      "gelu_amax kernel: ", what, " must be contiguous, of x's size, dtype and device");
}

template <typename Op>
void run_op(const at::Tensor& x, const at::Tensor& dy, at::Tensor& out, at::Tensor& amax) {
  TORCH_CHECK(x.is_contiguous(), "gelu_amax kernel: x must be contiguous");
  check(x, out, "the output");
  if (dy.defined()) check(x, dy, "dy");
  TORCH_CHECK(!amax.defined() || (amax.numel() == 1 && amax.scalar_type() == at::kFloat &&
                                  amax.device() == x.device() && amax.is_contiguous()),
              "gelu_amax kernel: amax must be one float32 on ", x.device());
  if (x.numel() == 0) return;
  const c10::cuda::CUDAGuard guard(x.device());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "gelu_amax_cuda",
                                  [&] { launch<Op, scalar_t>(x, dy, out, amax); });
}

}  // namespace

void gelu_amax_cuda(const at::Tensor& x, at::Tensor& h, at::Tensor& amax) { run_op<GeluOp>(x, {}, h, amax); }

void gelu_backward_amax_cuda(const at::Tensor& dy, const at::Tensor& x, at::Tensor& dx, at::Tensor& amax) {
  run_op<GeluBackwardOp>(x, dy, dx, amax);
}

}  // namespace xsagpt
