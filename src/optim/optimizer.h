// AdamW as the paper trains with it: decoupled weight decay on matrices only
// (embeddings and Linear weights), none on LayerNorm weights and biases; under μP a
// rate factor per parameter (AdamWConfig::rate_scales). Two
// interchangeable implementations with one state layout keyed by parameter name:
//  - "fused": ATen's _fused_adamw_ kernel (one launch per group on CUDA; also CPU);
//  - "torch": torch::optim::AdamW, the reference the fused path is tested against.
#pragma once

#include "config/optim_choices.h"

#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace xsagpt {

// Its defaults are the train.* keys' (train/parts.h: adamw_config), so none here.
struct AdamWConfig {
  double beta1, beta2, eps, weight_decay;
  AdamWImpl impl;
  // A factor on the rate of the parameters named, 1 for the others: μP's 1/m on the
  // hidden matrices (model/mup.h). A decaying parameter's weight decay is divided by
  // it, so that its decay per step (rate times decay, AdamW's decoupled form) stays
  // as without it, as the mup package's MuAdamW scales the two.
  std::map<std::string, double> rate_scales = {};
  double rate_scale(const std::string& name) const {
    const auto it = rate_scales.find(name);
    return it == rate_scales.end() ? 1.0 : it->second;
  }
};

// Per-parameter optimizer state by parameter name; what a checkpoint stores.
struct AdamWState {
  std::map<std::string, torch::Tensor> exp_avg, exp_avg_sq, step;
};

// A run's whole optimizer state (optim/run_optimizer.h), as a checkpoint holds it:
// which optimizer (train.optimizer), AdamW's state and, with Muon, its momentum
// buffers, each by parameter name.
struct OptimizerState {
  Optimizer name = Optimizer::kAdamW;
  AdamWState adamw;
  std::map<std::string, torch::Tensor> muon_momentum;
};

// Parameters that get weight decay: every tensor with 2 or more dimensions.
inline bool decays(const torch::Tensor& p) { return p.dim() >= 2; }

class AdamW {
 public:
  AdamW(std::vector<std::pair<std::string, torch::Tensor>> named_params, AdamWConfig cfg);
  ~AdamW();
  // One step at rate lr. clip, when defined, is a factor (0-dim float32, on the
  // parameters' device) every gradient is multiplied by first (optim/grad_clip.h):
  // the fused kernel applies it as it reads each float32 gradient (its grad_scale,
  // the reciprocal), every other case multiplies the gradients beforehand. Either
  // way the gradients are left multiplied, as clipping leaves them.
  void step(double lr, const torch::Tensor& clip = {});
  void zero_grad();
  AdamWState state() const;
  void load_state(const AdamWState& s);  // throws naming the missing/mismatched parameter
  const std::string& impl() const { return impl_; }
  const std::vector<torch::Tensor>& params() const { return params_; }

 private:
  struct Fused;
  // A parameter's group: its rate factor and weight decay (the config's over that factor, or 0).
  struct Group {
    double rate_scale, weight_decay;
    auto operator<=>(const Group&) const = default;
  };
  Group group_of(size_t i) const;
  std::vector<std::string> names_;
  std::vector<torch::Tensor> params_;
  AdamWConfig cfg_;
  std::string impl_;
  std::unique_ptr<Fused> fused_;
  std::unique_ptr<torch::optim::AdamW> torch_;
  std::vector<double> torch_rate_scales_;  // per param group of torch_
};

}  // namespace xsagpt
