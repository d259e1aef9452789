// The process group a training run sees. Single-process runs use this base class
// (every collective is the identity, gradient sync is plain loss.backward()); runs
// launched by torchrun or SLURM use the c10d subclass that make_dist_context()
// (distributed/process_group.h) returns, so the trainer has no distributed branches of
// its own.
#pragma once

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

namespace xsagpt {

// Runs the backward passes of one training run's micro-batches and clears the
// gradients between optimizer steps.
class GradientSync {
 public:
  explicit GradientSync(std::vector<torch::Tensor> params) : params_(std::move(params)) {}
  virtual ~GradientSync() = default;
  // loss.backward(). On an optimizer step's last micro-batch (`last`) the
  // gradients are also averaged over ranks, bucket by bucket while the backward
  // pass is still running, so that on return every rank holds the mean of all
  // ranks' accumulated gradients. Earlier micro-batches only accumulate locally:
  // one all-reduce per optimizer step.
  virtual void backward(const torch::Tensor& loss, bool last) { loss.backward(); }
  // Clears the gradients after an optimizer step. One process sets them to none:
  // the memory is free until the next backward pass and nothing has to be zeroed.
  // Distributed, they are zeroed in place instead, because there they are views
  // into the all-reduce buckets; set to none, every backward pass would allocate
  // fresh gradients beside the buckets (twice the gradient memory).
  virtual void zero_grad() {
    for (auto& p : params_) p.mutable_grad().reset();
  }

 protected:
  std::vector<torch::Tensor> params_;
};

class DistContext {
 public:
  virtual ~DistContext() = default;
  int64_t rank() const { return rank_; }
  int64_t local_rank() const { return local_rank_; }
  int64_t world_size() const { return world_size_; }
  bool is_main() const { return rank_ == 0; }

  // Make every rank's tensors equal to rank 0's (initial weights).
  virtual void broadcast(std::vector<torch::Tensor>& tensors) {}
  // Gradient averaging for one model's parameters (`params`: the same tensors in
  // the same order on every rank). Make one per training run, after broadcast().
  virtual std::unique_ptr<GradientSync> gradient_sync(const std::vector<torch::Tensor>& params) {
    return std::make_unique<GradientSync>(params);
  }
  // After a sharded optimizer step (ZeRO-1, optim/zero.h): rank owner[i] has
  // updated tensors[i]; on return every rank holds every tensor as its owner
  // computed it (a broadcast from each owner, bucketed). Every rank passes the
  // same tensors and owners.
  virtual void broadcast_from_owners(std::vector<torch::Tensor>& tensors, const std::vector<int64_t>& owner) {}
  // Rank 0 receives into `t` what rank `owner` passes as `t` (same shape, dtype
  // and device type); only those two ranks take part, and owner 0 is a no-op.
  // For assembling sharded optimizer state on rank 0, one tensor at a time.
  virtual void send_to_main(torch::Tensor& t, int64_t owner) {}
  // Mean of a 0-dim tensor over ranks (for logged losses).
  virtual torch::Tensor mean(const torch::Tensor& t) { return t; }
  // Every rank's JSON value, in rank order (loader states for checkpoints).
  virtual std::vector<nlohmann::json> all_gather(const nlohmann::json& j) { return {j}; }
  // True on every rank if it is true on any (a stop signal seen by one rank).
  virtual bool any(bool local) { return local; }
  // Throws if `tensors` are not bit-identical on every rank (compared through
  // exact integer checksums, see process_group.h); `what` names them in messages.
  virtual void check_replicated(const std::vector<torch::Tensor>& tensors, const std::string& what) {}
  virtual void barrier() {}

 protected:
  int64_t rank_ = 0, local_rank_ = 0, world_size_ = 1;
};

}  // namespace xsagpt
