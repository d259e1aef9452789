// What the modules of one GPT share while it runs: the runtime choices
// (config/runtime.h) and the bf16 and FP8 copies of its weights (kernels/linear.h,
// kernels/fp8_linear.h). Every
// product with a weight and every LayerNorm goes through here, so the choice
// between ATen with autocast and the fused kernels is made in one place and the
// modules read like the equations.
#pragma once

#include "config/runtime.h"
#include "kernels/amax_handoff.h"
#include "kernels/fp8_linear.h"
#include "kernels/linear.h"
#include "model/layers.h"

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <memory>

namespace xsagpt {

// bf16 autocast for one device type while alive (a no-op when disabled); nests.
class AutocastGuard {
 public:
  AutocastGuard(torch::Device device, bool enabled) : type_(device.type()), enabled_(enabled) {
    if (!enabled_) return;
    prev_ = at::autocast::is_autocast_enabled(type_);
    prev_dtype_ = at::autocast::get_autocast_dtype(type_);
    at::autocast::set_autocast_enabled(type_, true);
    at::autocast::set_autocast_dtype(type_, at::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~AutocastGuard() {
    if (!enabled_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(type_, prev_);
    at::autocast::set_autocast_dtype(type_, prev_dtype_);
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType type_;
  bool enabled_, prev_ = false;
  at::ScalarType prev_dtype_ = at::kBFloat16;
};

struct Exec {
  Runtime rt;
  WeightCache weights;
  Fp8WeightCache fp8_weights;

  // Takes `r` and sets the process-wide float32 matmul precision it asks for (TF32
  // on CUDA or not): a process runs one runtime, so the last one set holds.
  void set_runtime(const Runtime& r);
  // The precision scope a forward pass runs in: bf16 autocast on `device` when the
  // runtime computes in bf16 through autocast, nothing otherwise.
  AutocastGuard scope(torch::Device device) const { return AutocastGuard(device, rt.autocast()); }

  // x @ weight^T + bias: autocast's, or in bf16 from the cached copy (weights kernel).
  torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias = {});
  // The same for the blocks' linear layers (qkv, attention output, MLP up and
  // down), which the fp8 kernel runs as FP8 GEMMs from cached e4m3 copies when
  // they are large enough to gain (fp8_pays; every one with fp8_all); the LM
  // head stays on linear().
  torch::Tensor block_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias = {});
  // Whether block_linear runs the product with this weight as FP8 GEMMs.
  bool fp8_takes(const torch::Tensor& weight) const;
  // After the parameters changed in place: the bf16 and FP8 copies are made again.
  void refresh() {
    weights.refresh();
    fp8_weights.refresh();
  }
  // `weight` in the dtype its products run in (the cached copy with the weights kernel).
  torch::Tensor weight(const torch::Tensor& weight);
  // ln(x), its output in the compute dtype with the norm kernel. `reader`: the
  // weight of the block product that reads the output, if any: when it is FP8, the
  // norm kernel takes the output's amax on its way (kernels/amax_handoff.h).
  torch::Tensor norm(const LayerNorm& ln, const torch::Tensor& x, const torch::Tensor& reader = {});
  // The MLP's activation of `pre` (exact or tanh GELU), made by the product with
  // weight `maker` and read by the one with weight `reader`: when either is FP8 the
  // exact GELU's kernel takes the amax of what that product quantizes (h forward,
  // pre's gradient backward).
  torch::Tensor gelu(const torch::Tensor& pre, GeluKind kind, const torch::Tensor& maker = {},
                     const torch::Tensor& reader = {});
  // Which amaxes a producer takes on its way for the block products around it: of
  // its output for `reader`, of its input's gradient for `maker` (when FP8).
  Fp8Amax fp8_amax(const torch::Tensor& maker, const torch::Tensor& reader) const {
    return {fp8_takes(reader), fp8_takes(maker)};
  }
  // The dtype activations that come from x are computed in: bf16 when computing
  // in bf16, else x's own (float32, or float64 in the tests).
  c10::ScalarType dtype(const torch::Tensor& x) const { return rt.bf16 ? c10::kBFloat16 : x.scalar_type(); }
  // Whether products use the cached bf16 weight copies.
  bool copies() const { return rt.bf16 && rt.kernels.weights; }
};

using ExecPtr = std::shared_ptr<Exec>;

}  // namespace xsagpt
