// What the fused ops of src/kernels/ share on the host side. Each op is a custom
// autograd function whose inner arithmetic runs as a CUDA kernel when its tensors
// are on a CUDA device and the build has the kernels (nvcc found at configure
// time), and as ATen ops of the same formulas everywhere else: on a CPU the
// function, its saved state and its backward are therefore the ones a GPU runs,
// and the ATen twin is the reference the kernels are tested against.
#pragma once

#include <ATen/OpMathType.h>
#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include "kernels/built.h"

namespace xsagpt {

// The rule every op follows: the kernel for CUDA tensors when built, else ATen.
inline bool use_cuda_kernel(const torch::Tensor& t) { return t.is_cuda() && cuda_kernels_built(); }

// Inside the fused ops every dtype is explicit: autocast must not rewrite the ATen
// ops they are made of (the autocast state of the caller still holds outside).
using NoAutocast = c10::impl::ExcludeDispatchKeyGuard;
inline NoAutocast no_autocast() { return NoAutocast(c10::autocast_dispatch_keyset); }

}  // namespace xsagpt
