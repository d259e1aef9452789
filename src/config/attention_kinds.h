// The attention kinds as a config holds them: model.attention names one kind, and a
// kind may own model.* keys that only it reads (xsa owns xsa_layers and xsa_gate,
// gated owns out_gate). This is the table's half that needs no torch, a row per kind
// (attention_kinds.cpp): its name, its keys with their types and defaults, whether it
// applies a step, the fused kernel that runs that step and whether an export can
// write it. Parsing, validation, `xsagpt config --json`, the help text and the
// resolved AttentionSpec (config/attention_spec.h) read it; the other half, each
// kind's step, parameters and work, is model/attention_kinds.cpp, a row per kind in
// the same order (tests/cpp/model/test_attention_kind.cpp keeps the two in step).
#pragma once

#include "config/schema.h"

#include <array>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace xsagpt {

// model.xsa_gate (the xsa kind's): no gate, or a learned per-head gate starting as SA (alpha 0) or as XSA.
enum class XsaGate { kOff, kSa, kXsa };
inline constexpr std::array<std::pair<XsaGate, const char*>, 3> kXsaGateNames{
    {{XsaGate::kOff, "off"}, {XsaGate::kSa, "sa"}, {XsaGate::kXsa, "xsa"}}};
inline const auto& enum_names(XsaGate) { return kXsaGateNames; }
inline const char* name(XsaGate g) { return schema::enum_name(g); }

// model.out_gate (the gated kind's): one gate per head, or one per channel.
enum class OutGate { kHeadwise, kElementwise };
inline constexpr std::array<std::pair<OutGate, const char*>, 2> kOutGateNames{
    {{OutGate::kHeadwise, "headwise"}, {OutGate::kElementwise, "elementwise"}}};
inline const auto& enum_names(OutGate) { return kOutGateNames; }
inline const char* name(OutGate g) { return schema::enum_name(g); }

// What a kind's key holds in JSON: one of a few strings (read as an enum of the
// kind's file: option<XsaGate>), the layers that take the kind's step (null for
// every layer, a list of indices or "last N"), a boolean, an integer or a number.
enum class KeyType { kChoice, kLayers, kBool, kInteger, kNumber };

// A model.* key that only the kinds declaring it read.
struct KindKey {
  const char* name;  // model.<name>
  KeyType type;
  json default_value;
  const char* help;
  std::vector<std::string> choices;  // kChoice: its values, the default among them
  // How the variant name shows it where shown: " <label>=<value>" ("layers=last 3").
  const char* label;
  // How the description shows it: the text with {} for the value (", gated (starts as {})").
  const char* description;
  // Written into every config, at its default where the model's kind does not own it,
  // as configs have carried xsa_layers and xsa_gate since before kinds had keys; such
  // a key is shown where it differs from its default. Any other key is written and
  // shown only where a config set it.
  bool always_written = false;
};

struct AttentionKind {
  const char* name;  // model.attention's value
  const char* help;  // one line for the reference and `config --json`
  std::vector<KindKey> keys;
  bool step = false;  // applies a step to attention's output (SA applies none)
  // The train.kernels row whose fused kernel runs its step, or "" where its step runs
  // as ATen ops under any train.kernels (docs/kernels.md: no refusal, a log line).
  const char* kernel = "";
  // Why scripts/eval/export.py cannot write this kind, or "" where it can (every kind
  // by default: the export checklist asks a reason of any kind without its twins).
  const char* not_exportable = "";
};

// Every kind, in the table's order; the first is the default (model.attention's).
std::span<const AttentionKind> attention_kinds();
// The kind named `name`, or nullptr.
const AttentionKind* find_attention_kind(const std::string& name);
// The kind named `name`; ConfigError naming `where`.attention and the kinds otherwise.
const AttentionKind& attention_kind(const std::string& name, const std::string& where = "model");
// The names quoted and joined, for messages: "\"sa\", \"xsa\" or \"gated\"".
std::string attention_kind_choices();
// The key `name` as the first kind declaring it declares it, or nullptr for a key of no kind.
const KindKey* find_kind_key(const std::string& name);
// The kinds owning key `name`, as "attention=\"xsa\"" (several joined by " or ").
std::string kind_key_owners(const std::string& name);

}  // namespace xsagpt
