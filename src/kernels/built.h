// Whether this build has the CUDA kernels (a CUDA LibTorch and nvcc found at
// configure time): kernels/built.cu says yes, kernels/stubs.cpp no. Kept free of
// includes so that built.cu does not make nvcc parse LibTorch's headers.
#pragma once

namespace xsagpt {
bool cuda_kernels_built();
}  // namespace xsagpt
