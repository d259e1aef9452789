// The run directory's life cycle, around the training loop:
//   open_run          decide how to start and check it, reading only;
//   (train() then builds the model and data and restores the checkpoint: every
//    check that can fail does so before the directory is touched)
//   prepare_run_dir   make the directory what the run continues from;
//   finish_run        done.json, also for a run killed after its last checkpoint.
//
//   out_dir/config.json     resolved config of the run (written at start)
//   out_dir/metrics.jsonl   see train/metrics.h
//   out_dir/checkpoints/    see train/checkpoint.h
//   out_dir/done.json       written once the run reached train.max_steps
//
// A directory that already holds a run is never silently reused, and two runs are
// never mixed in one: a checkpoint belongs to the run in out_dir only when it lies
// in out_dir/checkpoints. Resuming from any other checkpoint into a directory that
// holds a run, or from one of the run's own checkpoints older than its newest, is
// refused unless --overwrite says to discard what the directory holds beyond it.
#pragma once

#include "config/run_config.h"
#include "train/checkpoint.h"
#include "util/atomic_file.h"

#include <cmath>
#include <filesystem>
#include <optional>

namespace xsagpt {

struct RunStart {
  std::optional<std::filesystem::path> checkpoint;  // resume from this, else fresh
  int64_t resume_step = -1;                         // that checkpoint's step
  bool clear = false;   // remove the previous run's files first
  bool rewind = false;  // remove the run's checkpoints past resume_step (resuming an older one)
};

// done.json: what the sweep summaries and the "already finished" message read.
struct RunSummary {
  int64_t step = 0, tokens = 0;
  double final_train_loss = NAN, final_val_loss = NAN;  // NaN (null in JSON): not known
  double wall_s = 0;
  json to_json() const;
  static RunSummary from_json(const json& j);
};

struct RunOpening {
  RunStart start;
  std::optional<Checkpoint> checkpoint;  // loaded, and compatible with the config and world size
  // Set when the checkpoint already reached train.max_steps: nothing to train.
  std::optional<RunSummary> finished;
  bool record_done = false;  // ... and out_dir's done.json is missing or stale
};

// Decides how to start from the options (resume: "", "auto" or a checkpoint path)
// and checks that decision: loads the checkpoint and checks it against the config
// and the world size. Writes nothing. Throws ConfigError / CheckpointError naming
// the directory, the file and what to do.
RunOpening open_run(const RunConfig& cfg, const std::string& resume, bool overwrite, int64_t world_size);

// For a run that open_run found finished: logs so with its losses and, where
// record_done says, writes done.json (finishing is idempotent).
void close_finished_run(const RunConfig& cfg, const RunOpening& run);

// Creates the directory and makes it hold exactly what the run continues from:
// clears it or drops what followed the resumed checkpoint (metrics lines, with
// rewind also checkpoints), removes temporary files of a killed save, then writes
// config.json and, for a resumed run, removes done.json, in that order, so a
// failure (e.g. a full disk) leaves a finished run finished. Call it only once
// everything that can be checked passed.
void prepare_run_dir(const std::filesystem::path& dir, const RunConfig& cfg, const RunStart& start);

// A checkpoint's config must describe the same model; train/data changes are
// allowed (e.g. a longer max_steps) and logged.
void check_resume_compatible(const RunConfig& cfg, const json& saved, const std::string& file);

// Writes done.json (atomically).
void finish_run(const std::filesystem::path& dir, const RunSummary& summary);

}  // namespace xsagpt
