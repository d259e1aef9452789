// `xsagpt bench`: what XSA costs (the paper's figure 2). Times one transformer
// block (attention + MLP), forward plus backward, with XSA off and on, over a grid
// of sequence lengths and widths, and one whole training step (forward, backward,
// clipping, AdamW) of a chosen model; also records peak tensor memory (see
// peak_memory.h). Variants:
//   sa            standard attention
//   xsa           XSA with its custom autograd function (what the model runs)
//   xsa-fused     XSA as the fused CUDA kernels (model/xsa_cuda.h; CUDA only)
//   xsa-autograd  XSA composed of ordinary ops (the version before the custom function)
// All variants of one grid point share weights and inputs, and their iterations
// are interleaved (sa, xsa, xsa-autograd, sa, ...), so drift in a shared machine's
// speed hits them alike; the step benchmark therefore holds one model per variant.
// Time per iteration is the median over iterations (CUDA synchronised around each);
// memory is measured on one more iteration of each variant after the timed ones.
#pragma once

#include "config/model_config.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

namespace xsagpt {

struct Timing {
  double median_ms = 0, min_ms = 0;
  int64_t peak_bytes = 0;
};

struct BenchOptions {
  torch::Device device = torch::kCPU;
  bool bf16 = false;  // bf16 autocast
  int64_t batch = 4;
  int64_t head_dim = 64;
  double mlp_ratio = 4.0;
  int64_t warmup = 2, iters = 10;
  std::vector<std::string> variants{"sa", "xsa", "xsa-autograd"};
  // Training step only: the train.activation_checkpointing and train.loss_chunk it runs with.
  std::string recompute = "none";
  int64_t loss_chunk = 0;
};

using Results = std::map<std::string, Timing>;  // by variant

// One block of width d_model (n_head = d_model / head_dim) at sequence length T.
Results bench_block(const BenchOptions& o, int64_t seq_len, int64_t d_model);

// One optimizer step of `model` (its attention set by each variant) on random
// tokens: micro_batch x seq_len, one micro-step.
Results bench_train_step(const BenchOptions& o, const ModelConfig& model, int64_t micro_batch, int64_t seq_len);

// The model config a variant runs: attention sa or xsa (every layer, no gate).
ModelConfig variant_config(ModelConfig c, const std::string& variant);

nlohmann::json to_json(const Timing& t);

}  // namespace xsagpt
