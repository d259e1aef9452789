// Checkpoints: one file per save, `checkpoints/step_XXXXXXXX.pt` in the run dir.
//
// Format: a PyTorch zip archive as torch.save writes it, holding one dict, so
// `torch.load(path, weights_only=True)` in Python reads it without xsagpt:
//   "format": "xsagpt-checkpoint", "version": 1,
//   "model": {nanoGPT-style name: tensor}  (tied lm_head.weight listed too),
//   "config": the resolved run config (nested dict, as config.json),
//   "optimizer": {"name": train.optimizer's name (config/optim_choices.h; absent
//     in older checkpoints: AdamW's), "exp_avg": {name: t}, "exp_avg_sq": {name: t},
//     "step": {name: t} (AdamW's, for every parameter AdamW updates, also from a
//     run with sharded optimizer state, optim/zero.h), "momentum_buffer": {name: t}
//     (Muon's, for every matrix Muon updates; empty with AdamW)},
//   "step": optimizer steps completed, "tokens": tokens trained on,
//   "loader": [one loader state per rank]: all the same, the stream's position (data/loader.h),
//     their number the world size of the run that saved it,
//   "val_shards": [{"file", "tokens", "fingerprint"} per validation shard] (data/loader.h:
//     ValidationSet::identity; absent in older checkpoints: not checked),
//   "val_sequences": how many sequences its validation set held (absent in older
//     checkpoints: not compared), "rng": {"cpu": t, "cuda": t (if any)},
//   "elapsed_s": training wall time so far,
//   "train_loss", "val_loss": the last ones logged (NaN before the first), so a
//     checkpoint of the final step holds the run's final losses (done.json can be
//     rewritten from it after a kill between the last save and done.json),
//   "train_window": {"loss_sum": float, "steps": int}: the losses of the steps since
//     the last train-loss log line (their sum, averaged over ranks) and their count,
//     so a run resumed between two log lines logs the same means an uninterrupted
//     run logs (absent in older checkpoints: an empty window),
//   "run_id": the run it belongs to (made when the run started, out_dir/run.json),
//     so a checkpoint copied in from another run is never taken for one of its own,
//   "rank_changes": [{"step", "from", "to"}] the resumes that changed its number of
//     ranks (run/progress_state.h; absent in older checkpoints: none),
//   "vocab": the compact vocabulary the model's ids index (data/vocab.h: vocab.json's
//     format, vocab_size, rest_id, rest_marker and gpt2_ids), so that sample, score
//     and the exports decode them without the shards; absent for GPT-2 ids,
//   "kernels": the fused kernels the run computed with, as train.kernels resolved them
//     on its device ("aten" for none; absent in older checkpoints), so a resume that
//     computes with others says so even when the config's words are the same ("auto").
//
// A checkpoint proves itself on load: every record's CRC-32 in the zip archive is
// checked against its bytes (PyTorch's reader does not), and every weight and
// optimizer moment must be finite. A checkpoint failing either is refused by every
// command that reads one (train --resume, sample, score, eval, analyze), naming the
// file. Weights that are not finite are never saved in the first place.
// Tensors stream to disk one by one (a 2.7B model never needs a second copy in
// memory). Writes go to a temporary file that is flushed and renamed over the
// target, so a crash or full disk mid-save leaves earlier checkpoints intact.
#pragma once

#include "optim/optimizer.h"
#include "run/progress_state.h"

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

namespace xsagpt {

// A checkpoint is the named set of the states of a run's parts; each part gives its
// own and loads its own (train/state.h), and only save_checkpoint and load_checkpoint
// know where in the file each lies (the format above).
using ModelWeights = std::map<std::string, torch::Tensor>;  // nanoGPT-style name -> tensor

// The data position: every rank's loader state (data/loader.h), the identity of the
// validation shards and the size of the validation set (absent in checkpoints of older
// versions: empty and -1, not checked).
struct DataState {
  nlohmann::json loader = nlohmann::json::array();
  nlohmann::json val_shards = nlohmann::json::array();
  int64_t val_sequences = -1;
  // The world size of the run that saved it.
  int64_t ranks() const { return static_cast<int64_t>(loader.size()); }
};

// The generators dropout draws from (cuda: undefined off CUDA).
struct RngState {
  torch::Tensor cpu, cuda;
};

struct Checkpoint {
  int64_t step = 0;    // optimizer steps completed
  int64_t tokens = 0;  // tokens trained on
  nlohmann::json config;
  ModelWeights model;
  OptimizerState optimizer;
  DataState data;
  RngState rng;
  ProgressState progress;  // absent parts in checkpoints of older versions: NaN losses, empty window, no run id
  std::string kernels;     // describe(Runtime::kernels) of the run; "" in checkpoints of older versions
  nlohmann::json vocab;    // data/vocab.h's vocab_to_json: null for GPT-2 ids
};

// The first tensor of `tensors` (named "<what>.<name>") holding a NaN or an infinity,
// or nullopt when all are finite.
std::optional<std::string> first_non_finite(const std::map<std::string, torch::Tensor>& tensors,
                                            const std::string& what);

// Checks a zip archive against util/zip_check.h's rule (its end records and directory
// consistent, every record's name in both places and its bytes against its CRC-32);
// throws CheckpointError naming the file and what is damaged.
void verify_archive(const std::filesystem::path& path);

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
// For messages after a failure: "The last good checkpoint, <path>, is kept." naming
// the newest one (each was checked finite when saved), or that there is none.
std::string last_good_checkpoint(const std::filesystem::path& run_dir);
// Deletes all but the newest `keep`, and never one of the steps `pinned` (where other
// runs branch off this one: train.ckpt_steps).
void prune_checkpoints(const std::filesystem::path& run_dir, int64_t keep, const std::vector<int64_t>& pinned = {});

}  // namespace xsagpt
