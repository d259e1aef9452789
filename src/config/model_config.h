// The model's hyperparameters (the `model` section of a run config, or a file in
// configs/model/). Defaults live in the member initialisers and nowhere else.
#pragma once

#include "config/attention_spec.h"
#include "config/schema.h"

#include <array>
#include <filesystem>
#include <utility>

namespace xsagpt {

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

// model.head_init: how the LM head starts (docs/lm-head-study.md; ModelConfig below).
enum class HeadInit { kNormal, kZero, kZeroNorm, kScaled };
inline constexpr std::array<std::pair<HeadInit, const char*>, 4> kHeadInitNames{{{HeadInit::kNormal, "normal"},
                                                                                 {HeadInit::kZero, "zero"},
                                                                                 {HeadInit::kZeroNorm, "zero_norm"},
                                                                                 {HeadInit::kScaled, "scaled"}}};
inline const auto& enum_names(HeadInit) { return kHeadInitNames; }
inline const char* name(HeadInit h) { return schema::enum_name(h); }

// model.parametrization: how initialisation, the optimizer's rates and two multipliers
// in the forward pass scale with width. "sp" is the standard parametrization every model
// trained before had; "mup" is the Maximal Update Parametrization (Tensor Programs V,
// Yang et al. 2022, arXiv 2203.03466; docs/training.md#mup), under which a rate tuned at
// one width holds at another. With m = d_model / mup_base_width:
//   hidden matrices (the blocks' projections and each kind's, model/attention_kinds.h):
//     initial std / sqrt(m), AdamW rate / m and weight decay * m (their product, the
//     decay per step, unchanged: the mup package's MuAdamW);
//   the LM head reads ln_f's output times 1/m (mup's MuReadout), its start the base's;
//   attention scores q.k * sqrt(b)/head_dim, b the base's head size (1/head_dim up to a
//     constant, chosen so that the base model's scores are SP's);
//   embeddings, sinks, norms, biases and per-head gates: as under sp.
// At d_model = mup_base_width a "mup" model is the "sp" model, bit for bit.
enum class Parametrization { kSp, kMup };
inline constexpr std::array<std::pair<Parametrization, const char*>, 2> kParametrizationNames{
    {{Parametrization::kSp, "sp"}, {Parametrization::kMup, "mup"}}};
inline const auto& enum_names(Parametrization) { return kParametrizationNames; }
inline const char* name(Parametrization p) { return schema::enum_name(p); }

struct ModelConfig {
  int64_t vocab_size = 50304;  // GPT-2's 50257 padded to a multiple of 64
  int64_t block_size = 1024;
  int64_t n_layer = 12;
  int64_t d_model = 768;
  int64_t n_head = 12;
  int64_t head_dim = 64;
  double mlp_ratio = 4.0;
  GeluKind gelu = GeluKind::kExact;
  // model.attention as written; what it means, with its kind's keys, is spec().
  std::string attention = attention_kinds().front().name;  // the kinds' table's first row
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
  HeadInit head_init = HeadInit::kNormal;
  double norm_eps = 1e-5;
  double xsa_eps = 1e-6;
  Parametrization parametrization = Parametrization::kSp;
  int64_t mup_base_width = 256;
  int64_t mup_base_head_dim = 0;  // 0: the model's own head_dim
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
      "#attention-kinds), each with the keys it owns (the model.* keys listed after this one)");
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
    v("parametrization", s.parametrization,
      "how the model scales with width (docs/training.md#mup): \"sp\" (standard, every shipped config's) or "
      "\"mup\" (the Maximal Update Parametrization of Tensor Programs V: with m = d_model / mup_base_width, hidden "
      "matrices start at std / sqrt(m) and train at AdamW rate / m, the LM head reads its input / m, attention "
      "scores scale as 1/head_dim; a rate tuned at one width holds at another). Not with train.optimizer=muon");
    v("mup_base_width", s.mup_base_width,
      "under \"mup\": the width (d_model) at which the model is its \"sp\" twin, bit for bit; tune there, or "
      "at any width, and keep it fixed while d_model changes");
    v("mup_base_head_dim", s.mup_base_head_dim,
      "under \"mup\": the base model's head size b, attention scores scaled by sqrt(b)/head_dim; 0 (default): "
      "the model's own head_dim, for models that grow in heads, not head size (the ladder's depth rungs)");
  }

  int64_t inner_dim() const { return n_head * head_dim; }
  bool mup() const { return parametrization == Parametrization::kMup; }
  // m = d_model / mup_base_width under "mup"; 1 under "sp".
  double width_multiplier() const;
  // What q.k is multiplied by before the softmax: 1/sqrt(head_dim), or sqrt(b)/head_dim under "mup".
  double attention_scale() const;
  // What ln_f's output is multiplied by before the LM head: 1/m.
  double logit_scale() const { return 1.0 / width_multiplier(); }
  // The width the LM head's start is computed at: d_model, or the base's under "mup"
  // (the head is not a hidden matrix: its start does not move with width).
  int64_t head_init_width() const { return mup() ? mup_base_width : d_model; }
  int64_t mlp_dim() const { return static_cast<int64_t>(mlp_ratio * static_cast<double>(d_model)); }
  // The attention as one value (config/attention_spec.h): its kind, the kind's keys,
  // the layers that take its step and the sinks. Resolved when the model section is
  // read; a config changed in code afterwards (model.attention, n_layer or n_sink
  // assigned, as tests and bench's variants do) is resolved again on the next call,
  // so the spec always describes the fields beside it.
  const AttentionSpec& spec() const;
  // Sets model.attention and its kind's keys as a model section spells them
  // ({{"xsa_gate", "sa"}}); ConfigError naming `where`.key as reading would.
  void set_attention(const std::string& kind, const json& keys = json::object(), const std::string& where = "model");
  // Throws ConfigError naming the first impossible value; `where` prefixes keys.
  void validate(const std::string& where = "model") const;

 private:
  mutable AttentionSpec spec_;
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
