// Everything a training run carries from one step to the next, built the same way
// on every rank: its parts (train/parts.h: the model, same seed, then rank 0's
// weights broadcast; the optimizer; the gradient all-reduce), the data position, the
// random generators, the progress (train/progress.h: losses, loss window, training
// time, run id) and the step and token counts. Each part gives its own state and
// loads its own; a checkpoint (run/checkpoint.h) is the named set of those states,
// so save() writes one and restore() puts one back, and a resumed run continues
// exactly where the saved one was.
#pragma once

#include "config/run_config.h"
#include "data/loader.h"
#include "data/prefetch.h"
#include "data/vocab.h"
#include "distributed/context.h"
#include "model/gpt.h"
#include "optim/run_optimizer.h"
#include "run/checkpoint.h"
#include "train/batch_trace.h"
#include "train/parts.h"
#include "train/progress.h"

#include <filesystem>
#include <memory>
#include <utility>
#include <vector>

namespace xsagpt {

class TrainingState {
 public:
  TrainingState(const RunConfig& cfg, const Runtime& rt, torch::Device device, DistContext& dist);
  ~TrainingState();

  // Before start(): every part's state from checkpoint `c` (read from `file`, named
  // in errors).
  void restore(const Checkpoint& c, const std::string& file);
  // Starts the background batch thread (batches come from it from here on) and the
  // progress clocks, with metrics lines going to `metrics_path` (rank 0).
  void start(const std::filesystem::path& metrics_path);
  // The next training micro-batch of this rank, on the model's device.
  std::pair<torch::Tensor, torch::Tensor> next_batch();
  // Writes checkpoint run_dir/checkpoints/step_N.pt on rank 0 (every rank takes
  // part: the optimizer state, data positions and loss window are gathered) and
  // keeps the newest `keep` besides those of train.ckpt_steps. Only finite states are saved.
  void save(const std::filesystem::path& run_dir, int64_t keep);

  TrainingParts parts;  // model, its unique parameters, gradient sync, optimizer
  DataLoader loader;
  ValidationSet val;
  Progress progress;
  int64_t step = 0, tokens = 0;

 private:
  // Every token id of every train and val shard against the vocabulary (DataError).
  // Returns the shards' vocabulary, which every checkpoint records.
  ShardVocab check_data(int64_t vocab_size) const;
  // The data part: every rank's loader position and the validation shards.
  DataState data_state();
  void load_data_state(const DataState& d, const std::string& file);
  // Warns (rank 0) when the checkpoint's run computed with other kernels than this one.
  void check_kernels(const Checkpoint& c, const std::string& file) const;
  const RunConfig& cfg_;
  torch::Device device_;
  DistContext& dist_;
  std::unique_ptr<PrefetchingLoader> batches_;
  BatchTrace trace_;  // off unless a test asks for it
  ShardVocab vocab_;  // the shards' (check_data), recorded in every checkpoint
};

}  // namespace xsagpt
