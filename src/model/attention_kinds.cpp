#include "model/attention_kinds.h"

#include "util/error.h"

#include <algorithm>
#include <iterator>

namespace xsagpt {

// Each kind's file defines these two (kind_<name>.cpp).
std::unique_ptr<AttentionStep> make_xsa_step(const StepContext& c);
int64_t xsa_step_params(const ModelConfig& c);
std::unique_ptr<AttentionStep> make_gated_step(const StepContext& c);
int64_t gated_step_params(const ModelConfig& c);
std::unique_ptr<AttentionStep> make_xsa_token_step(const StepContext& c);
int64_t xsa_token_step_params(const ModelConfig& c);

namespace {

// The kinds, a row each: model.attention's value, its description, the model.* keys
// it owns, keys of its own, whether it applies a step, the train.kernels row whose
// fused kernel runs that step, the name a transformers export's model card gives it,
// and its file's factory and parameter count. A new kind is its file and one row here.
// A function's static, built on first use: a ModelConfig made while globals are
// initialised still finds the table (its default kind is the first row).
std::span<const AttentionKindRow> kind_table() {
  static const AttentionKindRow table[] = {
      {{"sa", "standard causal self attention", {}, {}, /*step=*/false, "", "standard causal self attention (SA)"}},
      {{"xsa",
        "exclusive self attention: z = y - (y.v^) v^ per head (arXiv 2603.09078)",
        {"xsa_layers", "xsa_gate"},
        {},
        /*step=*/true,
        "xsa",
        "exclusive self attention (XSA)"},
       make_xsa_step,
       xsa_step_params},
      {{"gated",
        "output-gated attention: z = y * sigmoid(x.w) per head or per channel, x the layer's input (arXiv 2505.06708)",
        {},
        {{"out_gate",
          "the gate's width: \"headwise\" (one per head) or \"elementwise\" (one per channel)",
          {"headwise", "elementwise"}}},
        /*step=*/true,
        "",
        "output-gated attention"},
       make_gated_step,
       gated_step_params},
      {{"xsa_token",
        "XSA's step scaled by a gate per token and head, g = tanh(x.w + b) from the layer's input (modded-nanogpt)",
        {"xsa_layers"},
        {},
        /*step=*/true,
        "",
        "exclusive self attention gated per token"},
       make_xsa_token_step,
       xsa_token_step_params},
  };
  return table;
}

}  // namespace

std::span<const AttentionKindInfo> attention_kinds() {
  static const std::vector<AttentionKindInfo> infos = [] {
    std::vector<AttentionKindInfo> out;
    for (const auto& row : kind_table()) out.push_back(row.info);
    return out;
  }();
  return infos;
}

const AttentionKindInfo* find_attention_kind(const std::string& name) {
  for (const auto& k : attention_kinds())
    if (name == k.name) return &k;
  return nullptr;
}

std::string attention_kind_choices() {
  std::string out;
  const auto kinds = attention_kinds();
  for (size_t i = 0; i < kinds.size(); ++i)
    out += std::string(i == 0 ? "" : i + 1 == kinds.size() ? " or " : ", ") + "\"" + kinds[i].name + "\"";
  return out;
}

const AttentionKindRow& attention_kind_row(const std::string& name) {
  const auto table = kind_table();
  const auto row =
      std::find_if(table.begin(), table.end(), [&](const AttentionKindRow& r) { return name == r.info.name; });
  if (row == table.end())
    throw ConfigError("model.attention: expected " + attention_kind_choices() + ", got \"" + name + "\"");
  return *row;
}

}  // namespace xsagpt
