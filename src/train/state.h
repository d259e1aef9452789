// Everything a training run carries from one step to the next, built the same way
// on every rank: the model (same seed, then rank 0's weights broadcast), the
// optimizer (train/run_optimizer.h), the gradient all-reduce, the data position, the
// step and token counts and the random generators. restore() puts a checkpoint's
// state back; save() writes the state as one (train/checkpoint.h), so a resumed
// run continues exactly where the saved one was.
#pragma once

#include "config/run_config.h"
#include "data/loader.h"
#include "data/prefetch.h"
#include "dist/context.h"
#include "model/gpt.h"
#include "train/checkpoint.h"
#include "train/parts.h"
#include "train/run_optimizer.h"

#include <filesystem>
#include <memory>
#include <utility>
#include <vector>

namespace xsagpt {

class TrainingState {
 public:
  TrainingState(const RunConfig& cfg, const Runtime& rt, torch::Device device, DistContext& dist);
  ~TrainingState();

  // Before start(): the weights, AdamW state, data position, generators and counts
  // of checkpoint `c` (read from `file`, named in errors).
  void restore(const Checkpoint& c, const std::string& file);
  // Starts the background batch thread; batches come from it from here on.
  void start();
  // The next training micro-batch of this rank, on the model's device.
  std::pair<torch::Tensor, torch::Tensor> next_batch();
  // Writes checkpoint run_dir/checkpoints/step_N.pt on rank 0 (every rank takes
  // part: the optimizer state and data positions are gathered) and keeps the
  // newest `keep`; the final losses go in too, so done.json can be made from it.
  // `window` holds the steps since the last train-loss log line (train/progress.h).
  void save(const std::filesystem::path& run_dir, int64_t keep, double elapsed_s, double train_loss, double val_loss,
            const TrainWindow& window);

  GPT model{nullptr};
  std::vector<torch::Tensor> params;  // unique parameters, in one order on every rank
  std::unique_ptr<GradientSync> sync;
  std::unique_ptr<RunOptimizer> optimizer;
  DataLoader loader;
  ValidationSet val;
  int64_t step = 0, tokens = 0;
  std::string run_id;         // written into every checkpoint (train/run_dir.h)
  double elapsed_before = 0;  // training time of the sessions before this one

 private:
  // Every token id of every train and val shard against the vocabulary (DataError).
  void check_data(int64_t vocab_size) const;
  const RunConfig& cfg_;
  torch::Device device_;
  DistContext& dist_;
  std::unique_ptr<PrefetchingLoader> batches_;
};

}  // namespace xsagpt
