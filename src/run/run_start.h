// The start decision: how a run starts in its directory (fresh, from a checkpoint,
// or not at all because it already finished), made and checked before anything is
// written.
//
// A directory that already holds a run is never silently reused, and two runs are
// never mixed in one: a checkpoint belongs to the run in out_dir only when it lies
// in out_dir/checkpoints. Resuming from any other checkpoint into a directory that
// holds a run, or from one of the run's own checkpoints older than its newest, is
// refused unless --overwrite says to discard what the directory holds beyond it.
#pragma once

#include "config/run_config.h"
#include "run/checkpoint.h"
#include "run/done_json.h"

#include <filesystem>
#include <optional>
#include <string>

namespace xsagpt {

struct RunStart {
  std::optional<std::filesystem::path> checkpoint;  // resume from this, else fresh
  int64_t resume_step = -1;                         // that checkpoint's step
  bool clear = false;                               // remove the previous run's files first
  bool rewind = false;  // remove the run's checkpoints past resume_step (resuming an older one)
  std::string run_id;   // the run's id: new for a fresh start or a branch, else the resumed checkpoint's
  // A branch (open_run's branch_from): the run it branches off, whose metrics up to
  // resume_step become its history, and what run.json records of it.
  std::optional<std::filesystem::path> history_from;
  nlohmann::json branched_from;  // {"run", "checkpoint", "step", "run_id"}; null for any other start
};

struct RunOpening {
  RunStart start;
  std::optional<Checkpoint> checkpoint;  // loaded, and compatible with the config and world size
  // Set when the checkpoint already reached train.max_steps: nothing to train.
  std::optional<RunSummary> finished;
  bool record_done = false;  // ... and out_dir's done.json is missing or stale
};

// out_dir/run.json's run id, "" where there is none (a run of an older version).
std::string recorded_run_id(const std::filesystem::path& dir);

// Decides how to start from the options (resume: "", "auto" or a checkpoint path)
// and checks that decision: loads the checkpoint and checks it against the config
// and the world size. Writes nothing. Throws ConfigError / CheckpointError naming
// the directory, the file and what to do.
//
// branch_from (with resume "auto", or "" to start over with overwrite): a checkpoint of
// another run to start from while out_dir holds no checkpoint of its own. The branch is a run of its own (a new run
// id; run.json records where it branched off) whose history is the other run's
// metrics up to the checkpoint's step; once it has checkpoints it continues from them
// like any run. A warning names the first step before the checkpoint at which this
// config's schedule would have taken another rate than the other run's did: from
// there on the branch is not this config's run from scratch (optim/schedule.h).
RunOpening open_run(const RunConfig& cfg, const std::string& resume, bool overwrite, int64_t world_size,
                    const std::string& branch_from = "");

// For a run that open_run found finished: logs so with its losses and, where
// record_done says, writes done.json.
void close_finished_run(const RunConfig& cfg, const RunOpening& run);

}  // namespace xsagpt
