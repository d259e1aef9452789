// `xsagpt bench`: what XSA and the fused kernels cost (the paper's figure 2, and
// the GPU speed work). Times one transformer block (attention + MLP), forward plus
// backward, over a grid of sequence lengths and widths, and one whole training
// step (train/step.h: the step `xsagpt train` runs: micro-batches, clipping,
// AdamW, weight copies) of a chosen model; also records peak tensor memory (see
// peak_memory.h). A variant is an attention, optionally with its own kernels:
//   sa, xsa       standard attention, XSA (its step as the kernels choose)
//   xsa-ops       XSA's custom autograd function on ATen ops
//   xsa-fused     XSA's step as the fused CUDA kernels (kernels/xsa_cuda.h)
//   xsa-autograd  XSA composed of ordinary ops (the version before the custom function)
//   NAME@K        NAME with train.kernels K instead of --kernels ('+' separates
//                 kernel names: sa@aten, xsa@weights+norm, xsa@fused)
// Ratios are to the first variant. In the block grid the variants share weights
// and inputs and their iterations are interleaved, so drift in a shared machine's
// speed hits them alike. The training step runs the variants one after another,
// each model freed before the next is built, so the paper's sizes fit one GPU.
// Time per iteration is the median (CUDA synchronised around each); memory is
// measured on one more iteration of each variant after the timed ones. With
// `repeat` > 1 the training step runs the variants round after round, each round
// building every variant afresh, so a ratio between two variants can be read per
// round: its spread over rounds says whether a 1-2% difference is real or drift.
#pragma once

#include "config/model_config.h"
#include "config/run_config.h"
#include "config/runtime.h"
#include "distributed/context.h"
#include "train/parts.h"

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace xsagpt {

struct Timing {
  double median_ms = 0, min_ms = 0;  // over every timed iteration of every round
  // Training step on a CPU: the process's CPU time per step (median, min), which on a
  // shared machine leaves out the time spent waiting for a core; 0 on a GPU.
  double cpu_median_ms = 0, cpu_min_ms = 0;
  int64_t peak_bytes = 0;
  std::vector<double> round_ms;  // training step: the median of each round, in order
};

// The variants bench compares by default: the default kind, the kind XSA's kernels
// serve, and that one's step composed of ordinary ops ("sa", "xsa", "xsa-autograd").
std::vector<std::string> default_bench_variants();

struct BenchOptions {
  torch::Device device = torch::kCPU;
  int64_t batch = 4;
  int64_t head_dim = 64;
  double mlp_ratio = 4.0;
  int64_t warmup = 2, iters = 10;
  // The default kind, the kind the XSA kernels serve, and that one composed of
  // ordinary ops; read from the kinds' table (config/attention_kinds.h).
  std::vector<std::string> variants = default_bench_variants();
  // The train.* keys the training step runs with: train's defaults (AdamW, clipping,
  // seed) but for what the flags set (precision, kernels, checkpointing, loss chunk).
  TrainConfig train;
  // runtime_of(train, cuda): what the variants run with, before their own kernels.
  Runtime runtime;
  int64_t accumulation = 1;  // training step only: micro-batches per optimizer step
  int64_t repeat = 1;        // training step only: rounds over the variants
};

using Results = std::map<std::string, Timing>;  // by variant

// One block of width d_model (n_head = d_model / head_dim) at sequence length T.
Results bench_block(const BenchOptions& o, int64_t seq_len, int64_t d_model);

// The model, AdamW and gradient sync of one variant's training step, built by the
// function `train` builds its own with (train/parts.h), from o.train.
TrainingParts bench_training_parts(const BenchOptions& o, const ModelConfig& model, const std::string& variant,
                                   DistContext& dist);

// One optimizer step of `model` (attention and kernels set by each variant) on
// random tokens: `accumulation` micro-batches of micro_batch x seq_len.
Results bench_train_step(const BenchOptions& o, const ModelConfig& model, int64_t micro_batch, int64_t seq_len);

// The FLOP rate of a run config's training step on `device` (FLOP/s), for the
// ladder's dry run (sweep/ladder_plan.h: MeasureStep): one warm-up step and two timed,
// of the config's model and attention at its micro-batch, sequence length and
// accumulation for `world_size` ranks; the training FLOPs of its tokens
// (model/counts.h) over the median step time.
double step_flop_rate(const RunConfig& config, const torch::Device& device, int64_t world_size);

// The optimizer step alone (optim/run_optimizer.h: no forward or backward) of the
// first variant's model with o.train's settings but train.optimizer set to each of
// adamw and muon, on fixed random gradients; by optimizer name.
Results bench_optimizer_step(const BenchOptions& o, const ModelConfig& model);

// A variant's name taken apart: NAME[-IMPL][@KERNELS], NAME one of model.attention's
// names, IMPL (a kind the XSA kernels serve) the implementation of XSA's step it forces.
struct BenchVariant {
  std::string kind;
  std::optional<XsaImpl> xsa_impl;
  std::string kernels;  // train.kernels with '+' between names; empty: the --kernels of all
};
// Throws ConfigError for an unknown variant.
BenchVariant parse_bench_variant(const std::string& variant);

// What a variant runs: the model config (attention sa or xsa in every layer, no
// gate, no dropout) and the runtime (`base` with the variant's kernels and XSA
// implementation). Throws ConfigError for an unknown variant.
ModelConfig variant_config(ModelConfig c, const std::string& variant);
Runtime variant_runtime(Runtime base, const std::string& variant, bool cuda);

nlohmann::json to_json(const Timing& t);

}  // namespace xsagpt
