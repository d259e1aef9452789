// Shared helpers for the C++ tests.
#pragma once

#include "config/model_config.h"
#include "model/runtime.h"

#include <torch/torch.h>

#include <string>

namespace xsagpt::test {

// A model small enough for many forward/backward passes on a CPU core.
inline ModelConfig small_model(const std::string& attention, int64_t vocab = 64) {
  ModelConfig c;
  c.vocab_size = vocab;
  c.block_size = 32;
  c.n_layer = 2;
  c.d_model = 48;
  c.n_head = 3;
  c.head_dim = 20;  // inner width 60 != d_model on purpose
  c.attention = attention;
  return c;
}

// How a test runs a model: checkpointing mode, loss chunk, train.kernels spec (cuda: as on a GPU).
inline Runtime runtime(const std::string& recompute = "none", int64_t loss_chunk = 0,
                       const std::string& kernels = "aten", bool cuda = false, bool bf16 = false) {
  Runtime rt;
  rt.recompute = parse_recompute(recompute);
  rt.loss_chunk = loss_chunk;
  rt.kernels = parse_kernels(kernels, cuda);
  rt.bf16 = bf16;
  return rt;
}

inline std::string source_path(const std::string& rel) { return std::string(XSAGPT_SOURCE_DIR) + "/" + rel; }

}  // namespace xsagpt::test
