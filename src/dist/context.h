// The process group a training run sees. Single-process runs use this base class
// (every collective is the identity); torch.distributed (c10d) runs use the
// subclass made by init_distributed(), so the trainer has no distributed
// branches of its own.
#pragma once

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <memory>
#include <vector>

namespace xsagpt {

class DistContext {
 public:
  virtual ~DistContext() = default;
  int64_t rank() const { return rank_; }
  int64_t local_rank() const { return local_rank_; }
  int64_t world_size() const { return world_size_; }
  bool is_main() const { return rank_ == 0; }

  // Make every rank's tensors equal to rank 0's (initial weights).
  virtual void broadcast(std::vector<torch::Tensor>& tensors) {}
  // Average gradients over ranks, in place (once per optimizer step).
  virtual void average_gradients(const std::vector<torch::Tensor>& params) {}
  // Mean of a 0-dim tensor over ranks (for logged losses).
  virtual torch::Tensor mean(const torch::Tensor& t) { return t; }
  // Every rank's JSON value, in rank order (loader states for checkpoints).
  virtual std::vector<nlohmann::json> all_gather(const nlohmann::json& j) { return {j}; }
  // True on every rank if it is true on any (a stop signal seen by one rank).
  virtual bool any(bool local) { return local; }
  virtual void barrier() {}

 protected:
  int64_t rank_ = 0, local_rank_ = 0, world_size_ = 1;
};

}  // namespace xsagpt
