// Key/value cache for generation. Each layer keeps the keys (after RoPE) and
// values of every position processed so far, so a new token costs one position
// of work instead of a forward pass over the whole sequence. Capacity is the
// model's longest context: n_sink sink positions plus block_size tokens.
#pragma once

#include "config/model_config.h"

#include <torch/torch.h>

#include <utility>
#include <vector>

namespace xsagpt {

struct KVCache {
  explicit KVCache(const ModelConfig& cfg)
      : layers(cfg.n_layer, Layer{{}, {}, cfg.n_sink + cfg.block_size}), capacity(cfg.n_sink + cfg.block_size) {}

  struct Layer {
    torch::Tensor k, v;  // (B, H, capacity, head_dim), allocated on first use with k's dtype and device
    int64_t capacity;

    // Writes k, v (B, H, T, head_dim) at positions [past, past+T); returns the keys
    // and values of positions [0, past+T).
    std::pair<torch::Tensor, torch::Tensor> append(const torch::Tensor& k_new, const torch::Tensor& v_new,
                                                   int64_t past) {
      if (!k.defined() || k.size(0) != k_new.size(0)) {
        k = torch::empty({k_new.size(0), k_new.size(1), capacity, k_new.size(3)}, k_new.options());
        v = torch::empty({v_new.size(0), v_new.size(1), capacity, v_new.size(3)}, v_new.options());
      }
      const auto T = k_new.size(2);
      k.narrow(2, past, T).copy_(k_new);
      v.narrow(2, past, T).copy_(v_new);
      return {k.narrow(2, 0, past + T), v.narrow(2, 0, past + T)};
    }
  };

  std::vector<Layer> layers;
  int64_t capacity;
  int64_t length = 0;  // positions filled, sinks included

  void clear() { length = 0; }  // the tensors are reused
};

}  // namespace xsagpt
