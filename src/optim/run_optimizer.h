// The optimizer a training run steps, as train.optimizer chooses it: AdamW for
// every parameter (sharded over ranks or not, optim/zero.h), or Muon (optim/muon.h)
// for the matrices inside the blocks and AdamW, with its usual settings, for the
// rest (embedding, head, norms, biases, XSA gates, sinks), as torch.optim.Muon's
// documentation and modded-nanogpt split them. One schedule drives both: Muon's
// rate is the scheduled lr times muon_lr / lr.
//
// Muon is not sharded: train.shard_optimizer with Muon is refused when the config
// is validated (docs/training.md#muon says why).
#pragma once

#include "config/run_config.h"
#include "distributed/context.h"
#include "optim/muon.h"
#include "optim/zero.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace xsagpt {

// Muon as the train.muon_* keys set it.
MuonConfig muon_config(const TrainConfig& train);

class RunOptimizer {
 public:
  RunOptimizer(std::vector<std::pair<std::string, torch::Tensor>> named_params, const TrainConfig& train,
               const AdamWConfig& adamw, DistContext& dist);
  ~RunOptimizer();
  // One step at the scheduled rate lr (AdamW's; Muon's is lr * muon_lr / lr).
  // clip, when defined, is the gradient clip's factor, not yet applied
  // (optim/grad_clip.h): AdamW folds it into its fused pass, Muon's gradients are
  // multiplied by it first.
  void step(double lr, const torch::Tensor& clip = {});
  // The full state (every rank calls it when AdamW is sharded; complete on rank 0).
  OptimizerState state();
  // Throws ConfigError when `s` is another optimizer's, naming both.
  void load_state(const OptimizerState& s, const std::string& file);

  Optimizer name() const { return name_; }
  const AdamWConfig& config() const { return adamw_->config(); }
  const std::string& impl() const { return adamw_->impl(); }
  const Muon* muon() const { return muon_.get(); }
  // One line for the log: what each optimizer keeps, and where.
  std::string summary() const;

 private:
  Optimizer name_;
  double muon_scale_ = 1;  // muon_lr / lr
  std::unique_ptr<ShardedAdamW> adamw_;
  std::unique_ptr<Muon> muon_;
};

}  // namespace xsagpt
