// The kinds' table, the half the model reads (see attention_kinds.h).
#include "model/attention_kinds.h"

#include <fmt/format.h>

#include <stdexcept>

namespace xsagpt {

// Each kind's file defines its factory, parameter count and work (kind_<name>.cpp).
std::unique_ptr<AttentionStep> make_xsa_step(const StepContext& c);
int64_t xsa_step_params(const ModelConfig& c);
std::unique_ptr<AttentionStep> make_gated_step(const StepContext& c);
int64_t gated_step_params(const ModelConfig& c);
double gated_step_flops(const ModelConfig& c, int64_t seq_len);
double gated_step_activations(const ModelConfig& c, double a);
std::unique_ptr<AttentionStep> make_xsa_token_step(const StepContext& c);
int64_t xsa_token_step_params(const ModelConfig& c);
double xsa_token_step_flops(const ModelConfig& c, int64_t seq_len);
double xsa_token_step_activations(const ModelConfig& c, double a);

// The kinds, a row each, in the order of config/attention_kinds.cpp: the name of that
// row, its file's factory and parameter count, the parameters its step registers on a
// layer (with whether Muon may take each and what each is to μP: a gate read from the
// token through a d_model-wide projection is a hidden matrix, a gate per head a vector)
// and its work per token. XSA's step keeps
// only y and v, which attention keeps anyway, and the output projection reads z
// instead of the copy of y (model/xsa.h; measured equal): it adds no work to count.
// A function's static, built on first use, as the config half's.
std::span<const AttentionKindRow> attention_kind_rows() {
  static const AttentionKindRow table[] = {
      {"sa"},
      {"xsa", make_xsa_step, xsa_step_params, {{.name = "xsa_gate", .width = WidthRole::kVector}}},
      {"gated",
       make_gated_step,
       gated_step_params,
       {{.name = "out_gate", .width = WidthRole::kHidden}},
       {gated_step_flops, gated_step_activations}},
      {"xsa_token",
       make_xsa_token_step,
       xsa_token_step_params,
       {{.name = "xsa_token_gate", .width = WidthRole::kHidden},
        {.name = "xsa_token_gate_bias", .width = WidthRole::kVector}},
       {xsa_token_step_flops, xsa_token_step_activations}},
  };
  return table;
}

const AttentionKindRow& attention_kind_row(const AttentionSpec& spec) {
  const auto kinds = attention_kinds();
  const auto rows = attention_kind_rows();
  const auto i = static_cast<size_t>(&spec.kind() - kinds.data());
  if (i >= rows.size() || std::string(rows[i].name) != spec.kind().name)
    throw std::logic_error(fmt::format("attention \"{}\": the model's half of the kinds' table has no row for it at {}",
                                       spec.kind().name, i));
  return rows[i];
}

const StepParameter* find_step_parameter(const std::string& name) {
  for (const auto& row : attention_kind_rows())
    for (const auto& p : row.parameters)
      if (name == p.name) return &p;
  return nullptr;
}

}  // namespace xsagpt
