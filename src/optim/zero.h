// Sharded optimizer state, ZeRO stage 1 (Rajbhandari et al., 2020), for
// data-parallel runs with train.shard_optimizer: AdamW's two moments are 8 bytes
// per parameter, twice the fp32 weights, so keeping them on one rank in W instead
// of on every rank is what lets the large models fit. Each parameter has one owner
// rank; only the owner keeps its AdamW state and applies its update (to the full,
// averaged, clipped gradient that every rank holds), then broadcasts the result.
// Every rank computes the same update it would compute unsharded, with the same
// kernel, so a sharded run is bit-identical to an unsharded one.
//
// Checkpoints do not see the sharding: state() assembles the full state on rank 0
// (the format of run/checkpoint.h), and load_state() takes a full state and
// keeps this rank's part, so runs resume across shard_optimizer settings.
#pragma once

#include "distributed/context.h"
#include "optim/optimizer.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace xsagpt {

// The owner rank of each of a list of tensors of the given sizes: whole tensors,
// largest first (ties in list order), each to the rank holding the fewest bytes
// so far (ties: the lowest rank), as torch's ZeroRedundancyOptimizer partitions.
// A function of the sizes alone, so every rank computes the same partition.
std::vector<int64_t> partition_by_size(const std::vector<int64_t>& bytes, int64_t world_size);

class ShardedAdamW {
 public:
  // shard: split the state over dist's ranks (no effect with one rank).
  ShardedAdamW(std::vector<std::pair<std::string, torch::Tensor>> named_params, const AdamWConfig& cfg,
               DistContext& dist, bool shard);
  ~ShardedAdamW();
  // Updates this rank's parameters, then (sharded) sends them to every rank.
  // clip: as AdamW::step's (optim/optimizer.h).
  void step(double lr, const torch::Tensor& clip = {});
  // The full state by parameter name. Sharded, every rank must call it (it
  // communicates) and only rank 0 gets it, with the parts received from other
  // ranks in host memory; the other ranks get an empty state.
  AdamWState state();
  // Takes a full state (a checkpoint's) and keeps this rank's part.
  void load_state(const AdamWState& s);

  bool sharded() const { return sharded_; }
  const AdamWConfig& config() const { return cfg_; }
  const std::string& impl() const { return impl_; }
  // One line for the log: AdamW state bytes held per rank.
  std::string summary() const;

 private:
  DistContext& dist_;
  AdamWConfig cfg_;
  std::vector<std::pair<std::string, torch::Tensor>> params_;
  std::vector<torch::Tensor> tensors_;
  std::vector<int64_t> owner_;  // per parameter; empty when not sharded
  bool sharded_;
  bool asked_;  // train.shard_optimizer was set
  std::string impl_;
  std::unique_ptr<AdamW> local_;      // this rank's parameters; null if it owns none
  std::vector<int64_t> state_bytes_;  // per rank
};

}  // namespace xsagpt
