// Checkpoints: one file per save, `checkpoints/step_XXXXXXXX.pt` in the run dir.
//
// Format: a PyTorch zip archive as torch.save writes it, holding one dict, so
// `torch.load(path, weights_only=True)` in Python reads it without xsagpt:
//   "format": "xsagpt-checkpoint", "version": 1,
//   "model": {nanoGPT-style name: tensor}  (tied lm_head.weight listed too),
//   "config": the resolved run config (nested dict, as config.json),
//   "optimizer": {"exp_avg": {name: t}, "exp_avg_sq": {name: t}, "step": {name: t}},
//     every parameter's, also from a run with sharded optimizer state (train/zero.h),
//   "step": optimizer steps completed, "tokens": tokens trained on,
//   "loader": [one loader state per rank], "rng": {"cpu": t, "cuda": t (if any)},
//   "elapsed_s": training wall time so far,
//   "train_loss", "val_loss": the last ones logged (NaN before the first), so a
//     checkpoint of the final step holds the run's final losses (done.json can be
//     rewritten from it after a kill between the last save and done.json).
// Tensors stream to disk one by one (a 2.7B model never needs a second copy in
// memory). Writes go to a temporary file that is flushed and renamed over the
// target, so a crash or full disk mid-save leaves earlier checkpoints intact.
#pragma once

#include "train/optimizer.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

namespace xsagpt {

struct Checkpoint {
  int64_t step = 0;
  int64_t tokens = 0;
  double elapsed_s = 0;
  nlohmann::json config;
  std::map<std::string, torch::Tensor> model;
  AdamWState optimizer;
  nlohmann::json loader = nlohmann::json::array();
  torch::Tensor rng_cpu, rng_cuda;
  double train_loss = NAN, val_loss = NAN;  // absent in checkpoints of older versions: NaN
};

struct CheckpointError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void save_checkpoint(const Checkpoint& ckpt, const std::filesystem::path& path);
Checkpoint load_checkpoint(const std::filesystem::path& path);  // throws CheckpointError naming the file

std::filesystem::path checkpoint_path(const std::filesystem::path& run_dir, int64_t step);
// The step in a checkpoint's file name (step_XXXXXXXX.pt), or -1 for other names.
int64_t checkpoint_step(const std::filesystem::path& file);
// Checkpoints in run_dir/checkpoints, oldest (lowest step) first.
std::vector<std::filesystem::path> list_checkpoints(const std::filesystem::path& run_dir);
// Deletes all but the newest `keep`.
void prune_checkpoints(const std::filesystem::path& run_dir, int64_t keep);

}  // namespace xsagpt
