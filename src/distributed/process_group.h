// Data-parallel training over torch.distributed's c10d: the DistContext of a job
// launched by torchrun or srun (see launch_env.h).
//
// Setup mirrors torch.distributed.init_process_group("env://") in torch 2.11, so
// a job behaves as a PyTorch DDP job would and shares its store layout:
//   - TCPStore at MASTER_ADDR:MASTER_PORT. Rank 0 serves it (multi-tenant),
//     unless TORCHELASTIC_USE_AGENT_STORE=True: torchrun's agent already serves
//     it, and every rank connects as a client. Like PyTorch's rendezvous, no
//     per-restart key prefix: TORCHELASTIC_RESTART_COUNT is counted by each
//     node's agent and need not agree between nodes.
//   - Keys under "default_pg", then the group name "0/", then "cpu/" or "cuda/"
//     per backend, as PyTorch's default group uses them.
//   - One ProcessGroup with Gloo for CPU tensors and, when CUDA is available,
//     NCCL for CUDA tensors on device LOCAL_RANK ("auto"); "gloo" uses Gloo for
//     both, "nccl" insists on NCCL. Small control traffic (stop flags, loader
//     states, checksums) stays on Gloo so it never synchronises the GPU.
//   - Gradients go through c10d::Reducer, the engine behind PyTorch's
//     DistributedDataParallel: flattened ~25 MB buckets, each all-reduced from
//     an autograd hook as soon as its gradients are final, overlapping the rest
//     of the backward pass; one bucket on the first step, then re-bucketed in the
//     order gradients actually became ready. From the first backward pass on,
//     the gradients are views into the buckets (DDP's gradient_as_bucket_view)
//     and are zeroed in place between steps: no memory beyond the buckets.
//   - Sharded optimizer state (ZeRO-1, optim/zero.h): updated parameters are
//     broadcast from their owners with broadcast_coalesced (DDP's bucketed
//     broadcast); the state is sent to rank 0 with point-to-point send/recv
//     when a checkpoint is written.
//
// Settings (environment, read once at start):
//   XSAGPT_DIST_BACKEND   auto | nccl | gloo                   (default auto)
//   XSAGPT_DIST_TIMEOUT   seconds a collective or the store may wait for a
//                         peer before the job fails naming the operation (600)
//
// Replica checksum (check_replicated): for every tensor, its elements' bit
// patterns read as signed integers of the element's width and widened to int64;
// s1 = sum of them, s2 = sum of their squares, both modulo 2^64. Exact integer
// sums do not depend on summation order, so equal tensors give equal checksums on
// any device, and the values can be recomputed from a checkpoint. The log line
// shows s1:s2 summed over all the tensors, in hex.
#pragma once

#include "distributed/context.h"
#include "distributed/launch_env.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace xsagpt {

struct DistOptions {
  std::string backend = "auto";
  std::chrono::milliseconds timeout{600'000};
};
DistOptions dist_options_from_env(const EnvLookup& env = process_env);

class ProcessGroupContext : public DistContext {
 public:
  ProcessGroupContext(const LaunchEnv& env, const DistOptions& opts);
  ~ProcessGroupContext() override;

  void broadcast(std::vector<torch::Tensor>& tensors) override;
  std::unique_ptr<GradientSync> gradient_sync(const std::vector<torch::Tensor>& params) override;
  void broadcast_from_owners(std::vector<torch::Tensor>& tensors, const std::vector<int64_t>& owner) override;
  void send_to_main(torch::Tensor& t, int64_t owner) override;
  torch::Tensor mean(const torch::Tensor& t) override;
  std::vector<nlohmann::json> all_gather(const nlohmann::json& j) override;
  bool any(bool local) override;
  void check_replicated(const std::vector<torch::Tensor>& tensors, const std::string& what) override;
  void barrier() override;

  std::string description() const;  // backends, store and timeout, for the log

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// (s1, s2) of one tensor as defined above.
std::pair<uint64_t, uint64_t> replica_checksum(const torch::Tensor& t);

// The base DistContext without launcher variables; otherwise the c10d context
// (blocks until every rank has joined). Tags log lines with the rank when the
// world has more than one.
std::unique_ptr<DistContext> make_dist_context();

}  // namespace xsagpt
