// μP's rules per parameter (see mup.h).
#include "model/mup.h"

#include "util/error.h"

#include <fmt/format.h>

#include <cmath>

namespace xsagpt {

namespace {

// Every parameter's role, under "mup"; ConfigError for one its kind leaves unsaid.
std::vector<std::pair<std::string, WidthRole>> roles(const ModelConfig& cfg,
                                                     const std::vector<std::pair<std::string, torch::Tensor>>& params) {
  std::vector<std::pair<std::string, WidthRole>> out;
  for (const auto& [name, p] : params) {
    const auto role = width_role(cfg, name, p);
    if (role == WidthRole::kUnsaid)
      throw ConfigError(fmt::format(
          "model.parametrization: \"mup\" needs to know whether {} is a hidden matrix, and attention \"{}\" does not "
          "say (its row in src/model/attention_kinds.cpp: StepParameter::width)",
          name, cfg.attention));
    out.emplace_back(name, role);
  }
  return out;
}

}  // namespace

WidthRole width_role(const ModelConfig& cfg, const std::string& name, const torch::Tensor& p) {
  if (!name.starts_with("transformer.h.")) return WidthRole::kVector;  // wte, sink, ln_e, ln_f, lm_head
  // A parameter of the kind's step sits on the attention module under its own name (no dot).
  const auto attn = name.rfind(".attn.");
  const std::string own = attn == std::string::npos ? "" : name.substr(attn + 6);
  if (!own.empty() && own.find('.') == std::string::npos) {
    for (const auto& q : attention_kind_row(cfg.spec()).parameters)
      if (own == q.name) return q.width;
    return WidthRole::kUnsaid;  // registered, not declared (TheTablesTwoHalvesAreInStep fails it too)
  }
  return p.dim() >= 2 ? WidthRole::kHidden : WidthRole::kVector;  // the projections; norms and biases
}

std::map<std::string, double> mup_init_scales(const ModelConfig& cfg,
                                              const std::vector<std::pair<std::string, torch::Tensor>>& params) {
  std::map<std::string, double> out;
  if (!cfg.mup()) return out;
  const double scale = 1.0 / std::sqrt(cfg.width_multiplier());
  for (const auto& [name, role] : roles(cfg, params))
    if (role == WidthRole::kHidden) out[name] = scale;
  return out;
}

std::map<std::string, double> mup_rate_scales(const ModelConfig& cfg,
                                              const std::vector<std::pair<std::string, torch::Tensor>>& params) {
  std::map<std::string, double> out;
  if (!cfg.mup()) return out;
  const auto all = roles(cfg, params);  // refuses an unsaid role at m = 1 too
  if (cfg.width_multiplier() == 1.0) return out;
  for (const auto& [name, role] : all)
    if (role == WidthRole::kHidden) out[name] = 1.0 / cfg.width_multiplier();
  return out;
}

std::string describe_parametrization(const ModelConfig& cfg) {
  if (!cfg.mup()) return "sp";
  const double m = cfg.width_multiplier();
  return fmt::format(
      "mup, m = {:g} (d_model {} over base {}): hidden matrices start x{:.4g} and train at AdamW rate x{:.4g}, "
      "logits x{:.4g}, attention scores x{:.4g} (head_dim {}, base head size {})",
      m, cfg.d_model, cfg.mup_base_width, 1.0 / std::sqrt(m), 1.0 / m, cfg.logit_scale(), cfg.attention_scale(),
      cfg.head_dim, cfg.mup_base_head_dim > 0 ? cfg.mup_base_head_dim : cfg.head_dim);
}

}  // namespace xsagpt
