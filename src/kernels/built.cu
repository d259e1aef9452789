// Compiled only into builds that have the CUDA kernels (kernels/stubs.cpp is the other side).
#include "kernels/built.h"

namespace xsagpt {
bool cuda_kernels_built() { return true; }
}  // namespace xsagpt
