// The kinds' table, the half a config reads (see attention_kinds.h).
#include "config/attention_kinds.h"

#include <fmt/format.h>

#include <algorithm>

namespace xsagpt {

namespace {

template <class E>
std::vector<std::string> choice_names() {
  std::vector<std::string> out;
  for (const auto& [value, n] : enum_names(E{})) out.push_back(n);
  return out;
}

// xsa_layers: the key of every kind whose step model.xsa_layers selects.
KindKey step_layers_key() {
  return {"xsa_layers",
          KeyType::kLayers,
          nullptr,
          "the layers that apply the kind's step: null for every layer, a list of layer indices, or \"last N\"; the "
          "others are standard attention",
          {},
          "layers",
          "",
          /*always_written=*/true};
}

// The kinds, a row each: model.attention's value, its description, the keys it owns,
// whether it applies a step and the train.kernels row whose fused kernel runs that
// step. A new kind is its file in src/model/ and one row here and one in
// model/attention_kinds.cpp. A function's static, built on first use: a ModelConfig
// made while globals are initialised still finds the table.
std::span<const AttentionKind> kind_rows() {
  static const AttentionKind table[] = {
      {"sa", "standard causal self attention", {}, /*step=*/false},
      {"xsa",
       "exclusive self attention: z = y - (y.v^) v^ per head (arXiv 2603.09078)",
       {step_layers_key(),
        {"xsa_gate", KeyType::kChoice, "off",
         "learnable per-head XSA gate z = y - tanh(alpha) (y.v^) v^ in XSA layers: \"off\", or its start, \"sa\" "
         "(alpha = 0) or \"xsa\" (alpha = 9.25, tanh = 1 in float32: exactly XSA, but on tanh's flat tail, where the "
         "gradient is ~4e-8 of the SA start's and AdamW barely moves alpha)",
         choice_names<XsaGate>(), "gate", ", gated (starts as {})", /*always_written=*/true}},
       /*step=*/true,
       "xsa"},
      {"gated",
       "output-gated attention: z = y * sigmoid(x.w) per head or per channel, x the layer's input (arXiv 2505.06708)",
       {{"out_gate", KeyType::kChoice, "headwise",
         "the gate's width: \"headwise\" (one per head) or \"elementwise\" (one per channel)", choice_names<OutGate>(),
         "out_gate", ", out_gate={}"}},
       /*step=*/true},
      {"xsa_token",
       "XSA's step scaled by a gate per token and head, g = tanh(x.w + b) from the layer's input (modded-nanogpt)",
       {step_layers_key()},
       /*step=*/true},
  };
  return table;
}

}  // namespace

std::span<const AttentionKind> attention_kinds() { return kind_rows(); }

const AttentionKind* find_attention_kind(const std::string& name) {
  for (const auto& k : attention_kinds())
    if (name == k.name) return &k;
  return nullptr;
}

const AttentionKind& attention_kind(const std::string& name, const std::string& where) {
  if (const auto* k = find_attention_kind(name)) return *k;
  throw ConfigError(where + ".attention: expected " + attention_kind_choices() + ", got \"" + name + "\"");
}

std::string attention_kind_choices() {
  std::string out;
  const auto kinds = attention_kinds();
  for (size_t i = 0; i < kinds.size(); ++i)
    out += std::string(i == 0 ? "" : i + 1 == kinds.size() ? " or " : ", ") + "\"" + kinds[i].name + "\"";
  return out;
}

const KindKey* find_kind_key(const std::string& name) {
  for (const auto& kind : attention_kinds())
    for (const auto& key : kind.keys)
      if (name == key.name) return &key;
  return nullptr;
}

std::string kind_key_owners(const std::string& name) {
  std::string out;
  for (const auto& kind : attention_kinds())
    if (std::any_of(kind.keys.begin(), kind.keys.end(), [&](const KindKey& k) { return name == k.name; }))
      out += fmt::format("{}attention=\"{}\"", out.empty() ? "" : " or ", kind.name);
  return out;
}

}  // namespace xsagpt
