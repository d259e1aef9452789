// Device-side helpers shared by the kernels in src/kernels/*.cu: warp reductions
// and vector loads. Every kernel does its arithmetic in float32 (at::opmath_type)
// whatever the storage dtype, and moves VEC consecutive elements per load so a
// warp's loads cover 128-512 contiguous bytes.
#pragma once

#include <ATen/OpMathType.h>
#include <c10/macros/Macros.h>

#include <cstdint>

namespace xsagpt::cuda {

constexpr int kWarp = 32;

template <typename A>
__device__ __forceinline__ A warp_sum(A x) {
  for (int o = kWarp / 2; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

template <typename A>
__device__ __forceinline__ A warp_max(A x) {
  for (int o = kWarp / 2; o > 0; o /= 2) x = max(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

// *addr = max(*addr, v) for non-negative floats (an amax), whose IEEE bits order as
// signed integers do. A warp's lane 0 calls it with the warp's maximum; the plain
// read first skips the atomic whenever the warp cannot raise the value, so after the
// first rows almost no warp contends for the one address (a stale read only costs an
// atomic, never a wrong result).
__device__ __forceinline__ void atomic_amax(float* addr, float v) {
  if (v > __ldcg(addr)) atomicMax(reinterpret_cast<int*>(addr), __float_as_int(v));
}

// VEC elements of T moved as one aligned access.
template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Vec {
  T v[VEC];
};

template <typename T, int VEC>
__device__ __forceinline__ Vec<T, VEC> load_vec(const T* p) {
  return *reinterpret_cast<const Vec<T, VEC>*>(p);
}

template <typename T, int VEC>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, VEC>& x) {
  *reinterpret_cast<Vec<T, VEC>*>(p) = x;
}

// Whether every pointer is aligned for VEC-wide access of T.
template <typename T, int VEC>
inline bool aligned_for(std::initializer_list<const void*> ptrs) {
  for (const void* p : ptrs)
    if (p && reinterpret_cast<uintptr_t>(p) % (sizeof(T) * VEC) != 0) return false;
  return true;
}

}  // namespace xsagpt::cuda
