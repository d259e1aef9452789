// The model's hyperparameters (the `model` section of a run config, or a file in
// configs/model/). Defaults live in the member initialisers and nowhere else.
#pragma once

#include "config/attention_kinds.h"
#include "config/schema.h"

#include <array>
#include <filesystem>
#include <map>
#include <utility>

namespace xsagpt {

// model.xsa_gate: no gate, or a learned per-head gate starting as SA (alpha 0) or as XSA.
enum class XsaGate { kOff, kSa, kXsa };
inline constexpr std::array<std::pair<XsaGate, const char*>, 3> kXsaGateNames{
    {{XsaGate::kOff, "off"}, {XsaGate::kSa, "sa"}, {XsaGate::kXsa, "xsa"}}};
inline const auto& enum_names(XsaGate) { return kXsaGateNames; }
inline const char* name(XsaGate g) { return schema::enum_name(g); }

// model.gelu: the MLP's activation. "exact" is nanoGPT's erf GELU, x Phi(x);
// "tanh" is GPT-2's approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
// the form cuBLASLt's GEMM epilogues compute, so only a tanh model can run the
// MLP as those fused GEMMs (train.kernels "gelu", kernels/gelu_mlp.h). The two
// differ by at most about 5e-4 per activation: another model, not a rounding.
enum class GeluKind { kExact, kTanh };
inline constexpr std::array<std::pair<GeluKind, const char*>, 2> kGeluKindNames{
    {{GeluKind::kExact, "exact"}, {GeluKind::kTanh, "tanh"}}};
inline const auto& enum_names(GeluKind) { return kGeluKindNames; }
inline const char* name(GeluKind g) { return schema::enum_name(g); }

struct ModelConfig {
  int64_t vocab_size = 50304;  // GPT-2's 50257 padded to a multiple of 64
  int64_t block_size = 1024;
  int64_t n_layer = 12;
  int64_t d_model = 768;
  int64_t n_head = 12;
  int64_t head_dim = 64;
  double mlp_ratio = 4.0;
  GeluKind gelu = GeluKind::kExact;
  std::string attention = attention_kinds().front().name;  // the kinds' table's first row
  json xsa_layers = nullptr;
  XsaGate xsa_gate = XsaGate::kOff;
  int64_t n_sink = 0;
  double rope_theta = 10000.0;
  bool bias = false;
  double dropout = 0.0;
  // The LM head. Untied by default, N(0, sigma) with sigma = min(0.02, 0.5/sqrt(d_model)):
  // nanoGPT's init up to width 625, capped above so the step-0 logits have std <= 0.5 and
  // the loss starts within ~0.13 nats of ln(vocab) at any width. Tied to wte, as nanoGPT
  // ties it, the post-embedding LayerNorm makes the hidden state of token i about
  // LN(e_i), whose logit for token i itself is LN(e_i).e_i ~ 0.02 d_model (15 nats at
  // d_model 768, 51 at 2560): a fresh tied model is confident that every token repeats.
  // head_init offers the other starts the head study compared (docs/lm-head-study.md).
  bool tie_embeddings = false;
  std::string head_init = "normal";
  double norm_eps = 1e-5;
  double xsa_eps = 1e-6;
  // The options of the model's kind that it sets (AttentionKindInfo::options), by key:
  // read and written beside the fields, as model.<key>, only where set.
  std::map<std::string, std::string> kind_options;

  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("vocab_size", s.vocab_size, "vocabulary size (GPT-2's 50257 padded to a multiple of 64)");
    v("block_size", s.block_size, "longest sequence the model accepts (RoPE table length)");
    v("n_layer", s.n_layer, "number of transformer blocks");
    v("d_model", s.d_model, "residual stream width");
    v("n_head", s.n_head, "attention heads per layer");
    v("head_dim", s.head_dim, "width of one head; n_head*head_dim may differ from d_model");
    v("mlp_ratio", s.mlp_ratio, "MLP hidden width as a multiple of d_model");
    v("gelu", s.gelu,
      "the MLP's GELU: \"exact\" (erf, nanoGPT's; configs and checkpoints without the key) or \"tanh\" "
      "(GPT-2's tanh approximation, which cuBLASLt's GEMM epilogues compute: train.kernels \"gelu\" needs it)");
    v("attention", s.attention,
      "the attention kind: one of the kinds `xsagpt config --json` lists (\"attention_kinds\"; docs/sweeps-and-plots.md"
      "#attention-kinds), each with the keys it owns");
    v("xsa_layers", s.xsa_layers,
      "the layers that apply the kind's step (a kind that owns this key): null for every layer, a list of layer "
      "indices, or \"last N\"; the others are standard attention");
    v("xsa_gate", s.xsa_gate,
      "learnable per-head XSA gate z = y - tanh(alpha) (y.v^) v^ in XSA layers: \"off\", or its start, "
      "\"sa\" (alpha = 0) or \"xsa\" (alpha = 9.25, tanh = 1 in float32: exactly XSA, but on tanh's flat "
      "tail, where the gradient is ~4e-8 of the SA start's and AdamW barely moves alpha)");
    v("n_sink", s.n_sink,
      "learned attention-sink vectors prepended to every sequence (StreamingLLM), at positions "
      "0..n_sink-1 before the tokens; not in the loss or the logits");
    v("rope_theta", s.rope_theta, "RoPE base");
    v("bias", s.bias, "biases in Linear and LayerNorm layers");
    v("dropout", s.dropout, "dropout probability (embedding, attention output, MLP output)");
    v("tie_embeddings", s.tie_embeddings,
      "LM head shares the token embedding matrix (nanoGPT). Default false: the head is its own matrix "
      "(docs/lm-head-study.md: it trained best on both corpora measured)");
    v("head_init", s.head_init,
      "how the LM head starts (docs/lm-head-study.md): \"normal\" (untied: N(0, min(0.02, 0.5/sqrt(d_model))), "
      "logits of std <= 0.5 at any width, so the loss starts within ~0.13 nats of ln(vocab); tied: nanoGPT's "
      "N(0, 0.02) embedding, which behind ln_e starts ~0.02*d_model nats above it), \"zero\" (untied only: a zero "
      "matrix, exactly ln(vocab)), \"zero_norm\" (ln_f's gain starts at 0: exactly ln(vocab), tied or untied) or "
      "\"scaled\" (tied only: the shared matrix starts at N(0, 0.5/d_model), self-prediction 0.5 nats)");
    v("norm_eps", s.norm_eps, "LayerNorm epsilon");
    v("xsa_eps", s.xsa_eps, "floor on ||v|| when normalising the value vector in XSA");
  }

  int64_t inner_dim() const { return n_head * head_dim; }
  int64_t mlp_dim() const { return static_cast<int64_t>(mlp_ratio * static_cast<double>(d_model)); }
  // Whether layer `i` applies its kind's step (false everywhere for a kind without one).
  bool uses_step(int64_t layer) const;
  // The value of the kind's option `key` (its first choice where not set).
  std::string kind_option(const std::string& key) const;
  // The model's attention in words, for logs and reports: "sa", "xsa",
  // "xsa in layers 2,3, gated (starts as sa)", each with ", N sinks" when there are any
  // and the kind's options as ", key=value".
  std::string describe_attention() const;
  // The model's variant name: its attention, then " layers=L" (model.xsa_layers as
  // written), " gate=G", its options " key=value" and " sinks=N" where set ("xsa layers=last 3 gate=sa"). What
  // `xsagpt eval` reports for a model without a NAME= and config.json records as
  // "variant", where the Python tools (plot.py, table2.py) read it.
  std::string variant() const;
  // Throws ConfigError naming the first impossible value; `where` prefixes keys.
  void validate(const std::string& where = "model") const;
};

ModelConfig model_config_from_json(const json& j, const std::string& where = "model");
json to_json(const ModelConfig& c);

// Resolves a model reference ("tiny", "configs/model/tiny.json", a path) to a file.
// `relative_to` is the folder of the file that made the reference, if any.
std::filesystem::path resolve_model_file(const std::string& ref, const std::filesystem::path& relative_to = {});
// Reads a JSON file; errors name the file. Used for every config file.
json read_json_file(const std::filesystem::path& path);
ModelConfig load_model_config(const std::string& ref);

}  // namespace xsagpt
