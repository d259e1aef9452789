// The residual stream of  x = x + attn(ln_1(x));  x = x + mlp(ln_2(x)).
// Every branch's output is added to x and the sum is normalised by the next
// LayerNorm (the next half-block's, or ln_f). With the norm kernel that add is
// deferred into the LayerNorm (kernels/add_norm.h), one pass instead of an add, a
// norm and two casts; without it, add() adds at once and norm() is the module.
#pragma once

#include "model/exec.h"

namespace xsagpt {

class Residual {
 public:
  Residual(torch::Tensor x, Exec& exec) : x_(std::move(x)), exec_(&exec) {}

  // ln(x) with every branch added to x first. `reader`: the weight of the block
  // product that reads it (Exec::fp8_amax says why).
  torch::Tensor norm(const LayerNorm& ln, const torch::Tensor& reader = {});
  // x = x + branch (deferred with the norm kernel). `maker`: the weight of the
  // block product whose output the branch is (Exec::fp8_amax says why).
  void add(torch::Tensor branch, const torch::Tensor& maker = {});
  // x with every branch added.
  torch::Tensor flush();

 private:
  torch::Tensor x_, pending_, pending_maker_;
  Exec* exec_;
};

}  // namespace xsagpt
