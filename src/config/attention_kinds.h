// The attention kinds as the config layer sees them. model.attention names one kind;
// a kind may own model.* keys (XSA owns xsa_layers and xsa_gate) and options of its
// own (a key with a few string values that only it reads). The kinds themselves are
// one table in the model layer (model/attention_kinds.cpp: a row per kind, beside the
// file holding its step); that file also defines attention_kinds() below, so parsing,
// validation, `xsagpt config --json` and the help text read the one table without the
// config spelling any kind or including the model. Configuration only: no torch here.
#pragma once

#include <span>
#include <string>
#include <vector>

namespace xsagpt {

// A key only one kind reads, with its values; the first is the default.
struct KindOption {
  const char* name;
  const char* help;
  std::vector<std::string> choices;
};

struct AttentionKindInfo {
  const char* name;  // model.attention's value
  const char* help;  // one line for the reference and `config --json`
  // model.* keys (ModelConfig fields) only this kind reads: set on another kind, refused.
  std::vector<std::string> fields;
  std::vector<KindOption> options;  // keys of its own, written only where set
  bool step = false;                // applies a step to attention's output (SA applies none)
  // The train.kernels row whose fused kernel runs its step, or "" where its step runs
  // as ATen ops under any train.kernels (docs/kernels.md: no refusal, a log line).
  const char* kernel = "";
  const char* export_name = "";  // the class of the transformers export (scripts/eval/hf/)
};

// Every kind, in the table's order; the first is the default (model.attention's).
std::span<const AttentionKindInfo> attention_kinds();
// The kind named `name`, or nullptr.
const AttentionKindInfo* find_attention_kind(const std::string& name);
// The names quoted and joined, for messages: "\"sa\", \"xsa\" or \"gated\"".
std::string attention_kind_choices();

}  // namespace xsagpt
