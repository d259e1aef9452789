// The attention kinds: what a layer does to attention's output before the output
// projection. Each kind is one file (kind_*.cpp: its step, its parameters and its
// work) and a row in each half of the kinds' table: config/attention_kinds.cpp (its
// name, keys and description, what a config reads) and attention_kinds.cpp here (its
// factory and hooks, what the model and the counts need), the two in the same order.
// CausalSelfAttention builds its layer's step from the row and calls it; nothing else
// spells a kind: tools ask the table or the layer's step.
#pragma once

#include "config/model_config.h"
#include "model/exec.h"

#include <torch/torch.h>

#include <memory>
#include <span>
#include <string>
#include <vector>

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

// What a parameter is to μP (model.parametrization "mup", config/model_config.h): a
// hidden matrix, whose two sides both grow with width (its start shrinks by sqrt(m) and
// its AdamW rate by m: a projection from the layer's input, a gate's included), or a
// vector-like one, which keeps its start and rate (per-head gates, biases). A kind's row
// must say which each of its parameters is: a model under "mup" refuses a kind whose
// row leaves one unsaid, and tests/cpp/model/test_attention_kind.cpp names it.
enum class WidthRole { kUnsaid, kHidden, kVector };

// A parameter a kind's step registers on its layer, whether Muon may take it
// (train.optimizer=muon, optim/muon.h: a matrix of a kind goes to AdamW unless its
// row says Muon's orthogonalised update suits it), and its role under μP.
struct StepParameter {
  const char* name;
  bool muon = false;
  WidthRole width = WidthRole::kUnsaid;
};

// The work one layer's step adds, per token, to what counts (model/counts.h) holds for
// standard attention.
struct StepWork {
  // Training FLOPs (forward and backward) of the step's products, counted as the
  // blocks' products are: 6 per weight multiplied per token (PaLM's convention,
  // which counts matrix products only, so XSA's per-head dot products add none).
  double (*flops)(const ModelConfig&, int64_t seq_len) = nullptr;
  // Bytes autograd keeps from forward to backward beyond what attention keeps, with
  // activations of `a` bytes an element (2 in bf16, 4 in float32).
  double (*activations)(const ModelConfig&, double a) = nullptr;
};

struct AttentionKindRow {
  const char* name;  // its row's in config/attention_kinds.cpp, at the same place
  // The layer's step (null for a kind without one), and the parameters it adds to a layer.
  std::unique_ptr<AttentionStep> (*make)(const StepContext&) = nullptr;
  int64_t (*params)(const ModelConfig&) = nullptr;
  std::vector<StepParameter> parameters;
  StepWork work;
};

// The model half of the table, in the config half's order.
std::span<const AttentionKindRow> attention_kind_rows();
// The row of the model's kind.
const AttentionKindRow& attention_kind_row(const AttentionSpec& spec);
// The row declaring a step parameter named `name` (a layer's own name: "out_gate"), or nullptr.
const StepParameter* find_step_parameter(const std::string& name);

}  // namespace xsagpt
