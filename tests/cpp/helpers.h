// Shared helpers for the C++ tests.
#pragma once

#include "config/model_config.h"

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

inline std::string source_path(const std::string& rel) { return std::string(XSAGPT_SOURCE_DIR) + "/" + rel; }

}  // namespace xsagpt::test
