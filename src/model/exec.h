// What the modules of one GPT share while it runs: the runtime choices
// (model/runtime.h) and the bf16 copies of its weights (kernels/linear.h). Every
// product with a weight and every LayerNorm goes through here, so the choice
// between ATen with autocast and the fused kernels is made in one place and the
// modules read like the equations.
#pragma once

#include "kernels/linear.h"
#include "model/layers.h"
#include "model/runtime.h"

#include <torch/torch.h>

#include <memory>

namespace xsagpt {

struct Exec {
  Runtime rt;
  WeightCache weights;

  // x @ weight^T + bias: autocast's, or in bf16 from the cached copy (weights kernel).
  torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias = {});
  // `weight` in the dtype its products run in (the cached copy with the weights kernel).
  torch::Tensor weight(const torch::Tensor& weight);
  // ln(x), its output in the compute dtype with the norm kernel.
  torch::Tensor norm(const LayerNorm& ln, const torch::Tensor& x);
  // The dtype activations that come from x are computed in: bf16 when computing
  // in bf16, else x's own (float32, or float64 in the tests).
  c10::ScalarType dtype(const torch::Tensor& x) const { return rt.bf16 ? c10::kBFloat16 : x.scalar_type(); }
  // Whether products use the cached bf16 weight copies.
  bool copies() const { return rt.bf16 && rt.kernels.weights; }
};

using ExecPtr = std::shared_ptr<Exec>;

}  // namespace xsagpt
