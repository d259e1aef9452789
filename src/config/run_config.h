// A training run's configuration: the `model`, `data` and `train` sections plus
// `out_dir`. Read from a JSON file (whose `model` may name a file in
// configs/model/), then `--set section.key=value` overrides, then validated as a
// whole before any work starts. Defaults live in the member initialisers.
#pragma once

#include "config/model_config.h"
#include "config/optim_choices.h"
#include "config/runtime.h"

#include <cmath>
#include <string>
#include <vector>

namespace xsagpt {

struct DataConfig {
  std::string train;  // glob(s), comma separated
  std::string val;
  bool shuffle = true;

  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("train", s.train, "training shards: glob pattern(s), comma separated (llm.c .bin or nanoGPT raw uint16)");
    v("val", s.val, "validation shards: glob pattern(s); a fixed prefix of them is the val set");
    v("shuffle", s.shuffle, "shuffle shard order and sequence order each epoch");
  }
};

struct TrainConfig {
  double lr = 6e-4;
  double min_lr_ratio = 0.1;
  Schedule schedule = Schedule::kCosine;
  double decay_fraction = 0.2;
  int64_t warmup_steps = 2000;
  int64_t max_steps = 200000;
  int64_t seq_len = 1024;
  int64_t micro_batch = 8;
  int64_t batch_tokens = 0;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  Optimizer optimizer = Optimizer::kAdamW;
  double muon_lr = 0.02;
  double muon_momentum = 0.95;
  int64_t muon_ns_steps = 5;
  double muon_weight_decay = 0.0;
  MuonAdjustLr muon_adjust_lr = MuonAdjustLr::kOriginal;
  double grad_clip = 1.0;
  int64_t log_interval = 10;
  int64_t eval_interval = 250;
  int64_t eval_tokens = 1 << 20;
  int64_t eval_similarity_sequences = 4;
  int64_t eval_similarity_positions = 256;
  int64_t ckpt_interval = 1000;
  int64_t keep_checkpoints = 3;
  std::vector<int64_t> ckpt_steps;
  int64_t seed = 1337;
  std::string precision = "auto";
  std::string device = "auto";
  AdamWImpl adamw = AdamWImpl::kAuto;
  int threads = 0;  // LibTorch takes an int: the schema refuses what one cannot hold
  Recompute activation_checkpointing = Recompute::kNone;
  int64_t loss_chunk = 0;
  std::string kernels = "auto";
  bool shard_optimizer = false;

  // With schedule wsd, the first step of the decay (optim/schedule.h): the rate is lr
  // until it, and the decay takes decay_fraction of max_steps, rounded to whole steps.
  int64_t decay_start() const {
    return max_steps - std::llround(decay_fraction * static_cast<double>(max_steps));
  }

  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("lr", s.lr, "peak learning rate (after warmup)");
    v("min_lr_ratio", s.min_lr_ratio, "the decay (cosine or wsd's) ends at lr * min_lr_ratio at max_steps");
    v("schedule", s.schedule,
      "the rate after warmup: \"cosine\" (down to lr * min_lr_ratio over the rest of the run) or \"wsd\" "
      "(warmup-stable-decay: lr until the last decay_fraction of the run, then 1-sqrt down to lr * min_lr_ratio, "
      "as Hägele et al. 2024); a wsd run's max_steps may be changed on resume before its decay starts, bit-exact");
    v("decay_fraction", s.decay_fraction,
      "with schedule \"wsd\": the share of max_steps the decay takes (rounded to steps; 0: no decay); it starts "
      "at max_steps - round(decay_fraction * max_steps), not before warmup_steps");
    v("warmup_steps", s.warmup_steps, "linear warmup steps from 0 to lr");
    v("max_steps", s.max_steps, "optimizer steps in the run");
    v("seq_len", s.seq_len, "tokens per sequence (<= model.block_size)");
    v("micro_batch", s.micro_batch, "sequences per forward/backward on each rank");
    v("batch_tokens", s.batch_tokens,
      "tokens per optimizer step over all ranks; 0 = micro_batch*seq_len*world_size. "
      "Must be a multiple of that: the quotient is the gradient-accumulation count");
    v("weight_decay", s.weight_decay, "AdamW decoupled weight decay on matrices (not norms, biases)");
    v("beta1", s.beta1, "AdamW beta1");
    v("beta2", s.beta2, "AdamW beta2");
    v("eps", s.eps, "AdamW epsilon");
    v("optimizer", s.optimizer,
      "\"adamw\" (every parameter) or \"muon\" (Muon for the 2-D matrices inside the blocks: attention q/k/v/o "
      "and MLP; AdamW with the settings above for the embedding, LM head, norms, biases, XSA gates and sinks)");
    v("muon_lr", s.muon_lr, "Muon's peak learning rate; the schedule scales it as it scales lr (both logged)");
    v("muon_momentum", s.muon_momentum, "Muon's Nesterov momentum");
    v("muon_ns_steps", s.muon_ns_steps,
      "Newton-Schulz iterations orthogonalising each Muon update (quintic, torch.optim.Muon's coefficients)");
    v("muon_weight_decay", s.muon_weight_decay,
      "Muon's decoupled weight decay: each step multiplies its matrices by 1 - muon lr * this");
    v("muon_adjust_lr", s.muon_adjust_lr,
      "Muon's per-matrix rate for an A x B matrix (q, k, v counted apart): \"original\" muon_lr * "
      "sqrt(max(1, A/B)) or \"match_rms_adamw\" muon_lr * 0.2 * sqrt(max(A, B)), as torch.optim.Muon");
    v("grad_clip", s.grad_clip, "clip the global gradient norm to this (0 disables)");
    v("log_interval", s.log_interval, "steps between train-loss log lines");
    v("eval_interval", s.eval_interval, "steps between val-loss evaluations (0: only at the end)");
    v("eval_tokens", s.eval_tokens,
      "tokens in the fixed validation set (rounded down to whole batches; 0: all val sequences)");
    v("eval_similarity_sequences", s.eval_similarity_sequences,
      "at each evaluation, the similarity bias cos(y_i, v_i) of every layer (as `xsagpt analyze`) into "
      "metrics.jsonl, over this many sequences of each rank's first val batch (at most micro_batch; 0: off)");
    v("eval_similarity_positions", s.eval_similarity_positions,
      "the similarity bias's positions: the first this many tokens of each of those sequences (at most seq_len)");
    v("ckpt_interval", s.ckpt_interval, "steps between checkpoints (0: only at the end and on signals)");
    v("keep_checkpoints", s.keep_checkpoints, "newest checkpoints kept in out_dir/checkpoints");
    v("ckpt_steps", s.ckpt_steps,
      "steps at which a checkpoint is also saved, each kept whatever keep_checkpoints says: where other runs "
      "branch off this one (`train --branch-from`; a ladder's data ratios)");
    v("seed", s.seed, "seed for initialisation, data order and dropout");
    v("precision", s.precision, "\"auto\" (bf16 autocast on CUDA, fp32 on CPU), \"bf16\" or \"fp32\"");
    v("device", s.device, "\"auto\" (CUDA if present), \"cpu\", \"cuda\" or \"cuda:N\"");
    v("adamw", s.adamw, "\"auto\" (fused ATen kernel where it runs), \"fused\" or \"torch\" (torch::optim::AdamW)");
    v("threads", s.threads,
      "CPU intra-op threads, at most 1024 (0: LibTorch's default, one per physical core; above the "
      "machine's logical cores: capped to them, with a warning)");
    v("activation_checkpointing", s.activation_checkpointing,
      "recompute activations in backward to save memory: \"none\", \"mlp\" (MLP half of each block) or \"block\"");
    v("loss_chunk", s.loss_chunk,
      "compute the LM-head loss this many tokens at a time without full logits (0: all at once)");
    v("kernels", s.kernels, kernels_help());
    v("shard_optimizer", s.shard_optimizer,
      "with several ranks, each keeps AdamW state for (and updates) only its share of the parameters "
      "(ZeRO-1): AdamW memory per rank / world size, same results; no effect in one process; not with "
      "train.optimizer=muon");
  }
};

struct RunConfig {
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  std::string out_dir = "runs/default";

  // Cross-section checks; world_size enters the batch arithmetic.
  void validate(int64_t world_size = 1) const;
  int64_t tokens_per_micro_step(int64_t world_size) const { return train.micro_batch * train.seq_len * world_size; }
  int64_t accumulation_steps(int64_t world_size) const;
  // The tokens of an optimizer step over all ranks (the global batch).
  int64_t tokens_per_step(int64_t world_size) const {
    return train.batch_tokens > 0 ? train.batch_tokens : tokens_per_micro_step(world_size);
  }
  // How the model runs (config/runtime.h) on a CUDA device or not: runtime_of(train, cuda).
  Runtime runtime(bool cuda) const;
};

// The runtime the train.* keys ask for on a CUDA device or not. train and bench both
// build theirs here, so `bench` times the step `train` runs.
Runtime runtime_of(const TrainConfig& train, bool cuda);

// ConfigError naming `key` when the optimizer cannot train the model as its
// parametrization asks: μP's rates are AdamW's, so Muon with model.parametrization
// "mup" is refused (docs/training.md#mup says why).
void check_optimizer_fits_model(Optimizer optimizer, const ModelConfig& model, const std::string& key);

// The sections and out_dir, plus "variant" (the model's AttentionSpec::name) for the tools that
// read config.json; reading ignores "variant", which the model section determines.
json to_json(const RunConfig& c);
// Why `path` cannot be a run's path: its bytes from offset `at` are not UTF-8 (shown
// escaped, util/utf8.h). For the message naming the key or option.
std::string not_utf8(const std::string& path, size_t at);
// Reads a resolved run config (e.g. from a checkpoint or a run's config.json).
RunConfig run_config_from_json(const json& j, const std::string& where);
// Applies "section.key=value" overrides (value parsed as JSON, else taken as a string).
void apply_overrides(json& raw, const std::vector<std::string>& overrides);

// The overrides' keys of an attention kind the model they made is not, refused whatever
// their value (the rule of config/attention_spec.h: refuse_foreign_kind_key); a
// config file's own keys are checked as a file's when its model section is read.
// load_run_config and info's --set call it.
void check_kind_overrides(const ModelConfig& m, const std::vector<std::string>& overrides, const std::string& where);
// File -> model reference resolved -> overrides -> typed config, validated.
RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides = {},
                          int64_t world_size = 1);

std::string config_reference_markdown();

}  // namespace xsagpt
