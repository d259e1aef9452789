// The attention kinds: what a layer does to attention's output before the output
// projection. Each kind is one file (kind_*.cpp: its step and its parameters) and one
// row of the table in attention_kinds.cpp (its name, keys, description, the fused
// kernel that serves it, its export name). CausalSelfAttention builds its layer's
// step from the row and calls it; nothing else spells a kind: tools ask the table
// (config/attention_kinds.h for names and keys) or the layer's step.
#pragma once

#include "config/attention_kinds.h"
#include "config/model_config.h"
#include "model/exec.h"

#include <torch/torch.h>

#include <memory>
#include <string>

namespace xsagpt {

// One layer's step on SDPA's output. y, v: (B, H, T, D), v the layer's values;
// x: (B, T, d_model), the layer's input (after ln_1), for steps whose gate is read
// from the token. Returns z of y's shape and dtype.
class AttentionStep {
 public:
  virtual ~AttentionStep() = default;
  virtual torch::Tensor operator()(const torch::Tensor& y, const torch::Tensor& v, const torch::Tensor& x) const = 0;
  // Starts the parameter this step registered as `name` on its layer; false for
  // a parameter not its own (GPTImpl::init_weights asks every layer's step).
  virtual bool init(const std::string& name, torch::Tensor& p) const { return false; }
  // A per-head gate independent of the token, in float64, for the eval log's
  // diagnostics (train/eval_diagnostics.h); undefined where the step has none.
  virtual torch::Tensor head_gates() const { return {}; }
  // What a layer's description adds: ", gated (starts as sa)".
  virtual std::string describe() const { return ""; }
};

// What a kind's factory is given: the model, the layer's index, the layer module to
// register parameters on (their names are part of checkpoints) and its runtime.
struct StepContext {
  const ModelConfig& cfg;
  int64_t layer;
  torch::nn::Module& module;
  ExecPtr exec;
};

struct AttentionKindRow {
  AttentionKindInfo info;
  // The layer's step (null for a kind without one), and the parameters it adds to a layer.
  std::unique_ptr<AttentionStep> (*make)(const StepContext&) = nullptr;
  int64_t (*params)(const ModelConfig&) = nullptr;
};

// The row of `name`; ConfigError naming model.attention and the kinds otherwise.
const AttentionKindRow& attention_kind_row(const std::string& name);

}  // namespace xsagpt
