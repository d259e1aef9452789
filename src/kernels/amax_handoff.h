// The amax of an FP8 product's operands, handed from the kernel that made the
// operand to the product. Each FP8 quantization needs max |t| of its tensor (its
// scale, kernels/fp8_linear.h): the input x in the forward, the output's gradient g
// in the backward. A reduction for it reads t once more, 2 bytes an element of the
// step's largest tensors, while the kernel that writes t (the norm, the GELU, RoPE's
// backward, the norm's backward for a residual branch) has every element in a
// register anyway: it raises one float as it goes and hands it over here. The
// product takes it only for that very tensor at the version it had when handed over
// (not a view, a copy, or a tensor changed in place since), and otherwise reduces t
// itself: a missed handover costs a pass, never a wrong scale.
//
// One slot per thread: the forward runs on the caller's thread and the backward of
// CUDA tensors on autograd's device thread, and on each a product reads the tensor
// its producer made just before. Each take empties the slot, so it holds a tensor
// no longer than until its product.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace xsagpt {

// Which results of a producer an FP8 product reads, so which amaxes it takes and
// hands over: its output (forward) and the gradient it makes for its input, or for
// the residual branch the norm adds (backward).
struct Fp8Amax {
  bool output = false;
  bool input_grad = false;
};

// max |t| (a float32 scalar on t's device, exact): the reduction the producers'
// ATen twins take, and the one a quantizer runs when nothing was handed over.
torch::Tensor max_abs(const torch::Tensor& t);

// t's amax (a float32 scalar on t's device), for the next take_amax(t).
void hand_over_amax(const torch::Tensor& t, const torch::Tensor& amax);
// The amax handed over for t if t is that tensor, unchanged since; else undefined.
torch::Tensor take_amax(const torch::Tensor& t);
// The slot as it is, and put back: what a replayed forward (model/recompute.h)
// wraps itself in, so that its own handovers leave the one pending for the
// gradient it was called with in place.
struct AmaxSlot {
  torch::Tensor of, amax;
  int64_t version = 0;
};
AmaxSlot save_amax_slot();
void restore_amax_slot(AmaxSlot slot);
// How many takes found their amax, over the process (tests and diagnostics: a
// plumbing break shows as fewer).
int64_t amax_handovers_taken();

}  // namespace xsagpt
