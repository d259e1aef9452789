// CUDA kernel of kernels/lm_head_loss.h; see lm_head_loss_cuda.h.
//
// One block per row. Pass one reads the row once with an online softmax: each
// thread keeps a running maximum and the sum of exp(x - max) over its elements,
// then the block merges the pairs. Pass two (with write_grad) reads the row again
// and writes (exp(x - lse) - [j == target]) * scale over it. The target's logit is
// read before anything is overwritten. float32 arithmetic for any storage dtype.
#include "kernels/common.cuh"
#include "kernels/lm_head_loss_cuda.h"

#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <cfloat>

namespace xsagpt {

namespace {

using namespace xsagpt::cuda;

constexpr int kThreads = 512;

struct MaxSum {
  float m, s;  // running maximum and sum of exp(x - m)
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.0f};
  return {m, a.s * __expf(a.m - m) + b.s * __expf(b.m - m)};
}

template <typename T, int VEC>
__global__ void cross_entropy_rows_kernel(T* __restrict__ logits, const int64_t* __restrict__ targets,
                                          const float* __restrict__ inv_count, float* __restrict__ losses, int64_t V,
                                          bool write_grad) {
  __shared__ MaxSum warp_acc[kThreads / kWarp];
  __shared__ float target_logit;
  const int64_t row = blockIdx.x;
  T* x = logits + row * V;
  // -1 is ignored (as the count of inv_count and the ATen twin have it); a target
  // outside [0, V) otherwise has already failed lm_head_loss's device-side check,
  // and is treated as ignored here so that no thread reads past its row.
  const int64_t raw = targets[row];
  const int64_t target = raw >= 0 && raw < V ? raw : -1;
  if (threadIdx.x == 0) target_logit = target >= 0 ? static_cast<float>(x[target]) : 0.0f;

  MaxSum acc{-INFINITY, 0.0f};
  for (int64_t c = static_cast<int64_t>(threadIdx.x) * VEC; c < V; c += static_cast<int64_t>(kThreads) * VEC) {
    const auto v = load_vec<T, VEC>(x + c);
    float m = acc.m;  // rescale once per vector, then one exp per element
#pragma unroll
    for (int j = 0; j < VEC; ++j) m = fmaxf(m, static_cast<float>(v.v[j]));
    float s = acc.m == -INFINITY ? 0.0f : acc.s * __expf(acc.m - m);
#pragma unroll
    for (int j = 0; j < VEC; ++j) s += __expf(static_cast<float>(v.v[j]) - m);
    acc = {m, s};
  }
  for (int o = kWarp / 2; o > 0; o /= 2)
    acc = merge(acc, MaxSum{__shfl_xor_sync(0xffffffffu, acc.m, o), __shfl_xor_sync(0xffffffffu, acc.s, o)});
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (lane == 0) warp_acc[warp] = acc;
  __syncthreads();  // also publishes target_logit before any thread overwrites the row
  MaxSum total = warp_acc[0];
  for (int w = 1; w < kThreads / kWarp; ++w) total = merge(total, warp_acc[w]);
  const float lse = total.m + logf(total.s);
  if (threadIdx.x == 0) losses[row] = target >= 0 ? lse - target_logit : 0.0f;
  if (!write_grad) return;

  const float scale = target >= 0 ? *inv_count : 0.0f;
  for (int64_t c = static_cast<int64_t>(threadIdx.x) * VEC; c < V; c += static_cast<int64_t>(kThreads) * VEC) {
    auto v = load_vec<T, VEC>(x + c);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float p = __expf(static_cast<float>(v.v[j]) - lse);
      v.v[j] = static_cast<T>((p - (c + j == target ? 1.0f : 0.0f)) * scale);
    }
    store_vec<T, VEC>(x + c, v);
  }
}

}  // namespace

void cross_entropy_rows_cuda(at::Tensor& logits, const at::Tensor& targets, const at::Tensor& inv_count,
                             at::Tensor& losses, bool write_grad) {
  TORCH_CHECK(logits.dim() == 2 && logits.is_contiguous() && logits.is_cuda(),
              "cross_entropy_rows kernel: logits must be a contiguous CUDA matrix");
  const auto n = logits.size(0), V = logits.size(1);
  TORCH_CHECK(targets.scalar_type() == at::kLong && targets.numel() == n && targets.is_contiguous(),
              "cross_entropy_rows kernel: targets must be contiguous int64 (n)");
  TORCH_CHECK(losses.scalar_type() == at::kFloat && losses.numel() == n && losses.is_contiguous(),
              "cross_entropy_rows kernel: losses must be contiguous float32 (n)");
  TORCH_CHECK(inv_count.scalar_type() == at::kFloat && inv_count.numel() == 1,
              "cross_entropy_rows kernel: inv_count must be one float32");
  if (n == 0) return;
  const c10::cuda::CUDAGuard guard(logits.device());
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, logits.scalar_type(), "cross_entropy_rows_cuda", [&] {
    constexpr int kVec = 16 / sizeof(scalar_t);
    const bool wide = V % kVec == 0 && aligned_for<scalar_t, kVec>({logits.const_data_ptr()});
    auto run = [&](auto vec_tag) {
      constexpr int VEC = decltype(vec_tag)::value;
      cross_entropy_rows_kernel<scalar_t, VEC><<<static_cast<unsigned>(n), kThreads, 0, stream>>>(
          logits.mutable_data_ptr<scalar_t>(), targets.const_data_ptr<int64_t>(), inv_count.const_data_ptr<float>(),
          losses.mutable_data_ptr<float>(), V, write_grad);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    };
    if (wide)
      run(std::integral_constant<int, kVec>{});
    else
      run(std::integral_constant<int, 1>{});
  });
}

}  // namespace xsagpt
