// CUDA kernels of kernels/fp8_cast_cuda.h. The cast: a thread per VEC consecutive
// elements (16 bytes of bf16 read, 8 written). The cast with its transpose: a block
// per 64 x 64 tile, its rows read and q's rows written by consecutive threads, the
// bytes kept in shared memory and written back along the tile's columns, so qt's
// rows are written by consecutive threads too. Every thread computes the scale from
// amax itself (a division and a max, cheaper than a launch), and the first thread of
// the grid writes its inverse for the GEMM. Both convert the clamped float32
// product with c10's float-to-FP8 conversion, the one ATen's CPU and CUDA casts use,
// so the kernels and the ATen twin in fp8_linear.cpp round alike.
#include "kernels/common.cuh"
#include "kernels/fp8_cast_cuda.h"

#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Float8_e4m3fn.h>
#include <c10/util/Float8_e5m2.h>

#include <limits>

namespace xsagpt {

namespace {

using namespace xsagpt::cuda;

// top / max(amax, floor), the quotient IEEE float32 division gives: the same as
// ATen's float32 clamp_min and division of the twin (nvcc's division is exact
// rounding unless -prec-div=false, which this build does not set).
__device__ __forceinline__ float fp8_scale(const float* amax, float top) { return top / fmaxf(*amax, kFp8AmaxFloor); }

__device__ __forceinline__ void write_inverse(float* inv, float s) {
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && threadIdx.y == 0) *inv = 1.0f / s;
}

template <typename Q, typename T>
__device__ __forceinline__ Q scale_to_fp8(T v, float s, float top) {
  return Q(fminf(fmaxf(static_cast<float>(v) * s, -top), top));
}

template <typename T, typename Q, int VEC>
__global__ void fp8_scale_cast_kernel(const T* __restrict__ x, const float* __restrict__ amax, float top,
                                      Q* __restrict__ q, float* __restrict__ inv, int64_t n_vec) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const float s = fp8_scale(amax, top);
  write_inverse(inv, s);
  if (i >= n_vec) return;
  const auto in = load_vec<T, VEC>(x + i * VEC);
  Vec<Q, VEC> out;
#pragma unroll
  for (int j = 0; j < VEC; ++j) out.v[j] = scale_to_fp8<Q>(in.v[j], s, top);
  store_vec<Q, VEC>(q + i * VEC, out);
}

template <typename T, typename Q>
void launch_fp8_cast(const at::Tensor& x, const at::Tensor& amax, float top, at::Tensor& q, at::Tensor& inv) {
  constexpr int kVec = 8, kThreads = 256;
  const int64_t n = x.numel();
  const auto* in = x.data_ptr<T>();
  auto* out = reinterpret_cast<Q*>(q.data_ptr());
  auto stream = at::cuda::getCurrentCUDAStream();
  auto run = [&](auto vec) {
    constexpr int V = decltype(vec)::value;
    const int64_t n_vec = n / V;
    fp8_scale_cast_kernel<T, Q, V><<<static_cast<unsigned>((n_vec + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        in, amax.data_ptr<float>(), top, out, inv.data_ptr<float>(), n_vec);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  };
  if (n % kVec == 0 && aligned_for<T, kVec>({in}) && aligned_for<Q, kVec>({out}))
    run(std::integral_constant<int, kVec>{});
  else
    run(std::integral_constant<int, 1>{});
}

// A 64 x 64 tile per block of 64 x 4 threads; the shared tile's rows are padded to
// 68 bytes (17 words) so that the column reads of 32 threads fall in 32 banks.
constexpr int kTile = 64, kTileRowsPerPass = 4, kTilePad = 4;

template <typename T, typename Q>
__global__ void fp8_scale_cast_transpose_kernel(const T* __restrict__ x, const float* __restrict__ amax, float top,
                                                uint8_t* __restrict__ q, uint8_t* __restrict__ qt,
                                                float* __restrict__ inv, int64_t rows, int64_t cols) {
  __shared__ uint8_t tile[kTile][kTile + kTilePad];
  const float s = fp8_scale(amax, top);
  write_inverse(inv, s);
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kTile, c0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int tx = threadIdx.x, ty = threadIdx.y;
  if (c0 + tx < cols) {
#pragma unroll 4
    for (int i = ty; i < kTile; i += kTileRowsPerPass) {
      const int64_t r = r0 + i;
      if (r >= rows) break;
      const uint8_t bits = scale_to_fp8<Q>(x[r * cols + c0 + tx], s, top).x;
      q[r * cols + c0 + tx] = bits;
      tile[i][tx] = bits;
    }
  }
  __syncthreads();
  if (r0 + tx < rows) {
#pragma unroll 4
    for (int i = ty; i < kTile; i += kTileRowsPerPass) {
      const int64_t c = c0 + i;
      if (c >= cols) break;
      qt[c * rows + r0 + tx] = tile[tx][i];
    }
  }
}

template <typename T, typename Q>
void launch_fp8_cast_transpose(const at::Tensor& x, const at::Tensor& amax, float top, at::Tensor& q, at::Tensor& qt,
                               at::Tensor& inv) {
  const int64_t rows = x.size(0), cols = x.size(1);
  const int64_t row_tiles = (rows + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
  TORCH_CHECK(row_tiles <= 65535 && col_tiles <= std::numeric_limits<int>::max(),
              "fp8_scale_cast_transpose_cuda: ", rows, " rows is more than the grid takes");
  const dim3 grid(static_cast<unsigned>(col_tiles), static_cast<unsigned>(row_tiles));
  const dim3 block(kTile, kTileRowsPerPass);
  fp8_scale_cast_transpose_kernel<T, Q><<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<T>(), amax.data_ptr<float>(), top, reinterpret_cast<uint8_t*>(q.data_ptr()),
      reinterpret_cast<uint8_t*>(qt.data_ptr()), inv.data_ptr<float>(), rows, cols);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void check_scalar(const at::Tensor& x, const at::Tensor& t, const char* name, const char* what) {
  TORCH_CHECK(t.numel() == 1 && t.scalar_type() == at::kFloat && t.device() == x.device() && t.is_contiguous(), name,
              ": ", what, " must be one float32 on x's device");
}

// Runs launch<T, Q> for x's dtype T and q's FP8 dtype Q.
template <typename Launch>
void dispatch_fp8(const at::Tensor& x, const at::Tensor& q, const char* name, Launch&& launch) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "fp8_cast_cuda", [&] {
    if (q.scalar_type() == at::kFloat8_e4m3fn)
      launch(scalar_t{}, c10::Float8_e4m3fn{});
    else if (q.scalar_type() == at::kFloat8_e5m2)
      launch(scalar_t{}, c10::Float8_e5m2{});
    else
      TORCH_CHECK(false, name, ": q is ", q.scalar_type(), ", not e4m3fn or e5m2");
  });
}

}  // namespace

void fp8_scale_cast_cuda(const at::Tensor& x, const at::Tensor& amax, double top, at::Tensor& q, at::Tensor& inv) {
  TORCH_CHECK(x.is_contiguous() && q.is_contiguous() && x.numel() == q.numel() && x.numel() > 0,
              "fp8_scale_cast_cuda: bad layout");
  check_scalar(x, amax, "fp8_scale_cast_cuda", "amax");
  check_scalar(x, inv, "fp8_scale_cast_cuda", "inv");
  const c10::cuda::CUDAGuard guard(x.device());
  dispatch_fp8(x, q, "fp8_scale_cast_cuda", [&](auto t, auto f) {
    launch_fp8_cast<decltype(t), decltype(f)>(x, amax, static_cast<float>(top), q, inv);
  });
}

void fp8_scale_cast_transpose_cuda(const at::Tensor& x, const at::Tensor& amax, double top, at::Tensor& q,
                                   at::Tensor& qt, at::Tensor& inv) {
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && q.is_contiguous() && qt.is_contiguous() && q.sizes() == x.sizes() &&
                  qt.size(0) == x.size(1) && qt.size(1) == x.size(0) && x.numel() > 0,
              "fp8_scale_cast_transpose_cuda: bad layout");
  TORCH_CHECK(q.scalar_type() == qt.scalar_type(), "fp8_scale_cast_transpose_cuda: q and qt differ in dtype");
  check_scalar(x, amax, "fp8_scale_cast_transpose_cuda", "amax");
  check_scalar(x, inv, "fp8_scale_cast_transpose_cuda", "inv");
  const c10::cuda::CUDAGuard guard(x.device());
  dispatch_fp8(x, q, "fp8_scale_cast_transpose_cuda", [&](auto t, auto f) {
    launch_fp8_cast_transpose<decltype(t), decltype(f)>(x, amax, static_cast<float>(top), q, qt, inv);
  });
}

}  // namespace xsagpt
