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
//   out_dir/run.json        {"run_id": ...}, made at a fresh start; every checkpoint
//                           carries it, and --resume auto refuses one that does not
//   out_dir/.lock           see lock_run_dir
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
#include "util/dir_lock.h"

#include <cmath>
#include <filesystem>
#include <optional>

namespace xsagpt {

struct RunStart {
  std::optional<std::filesystem::path> checkpoint;  // resume from this, else fresh
  int64_t resume_step = -1;                         // that checkpoint's step
  bool clear = false;                               // remove the previous run's files first
  bool rewind = false;  // remove the run's checkpoints past resume_step (resuming an older one)
  std::string run_id;   // the run's id: new for a fresh start, else the resumed checkpoint's
};

// out_dir/run.json's run id, "" where there is none (a run of an older version).
std::string recorded_run_id(const std::filesystem::path& dir);

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

// Creates the directory and makes it hold what the run continues from: clears it
// (with rewind drops the checkpoints past the resumed one), removes temporary files
// of a killed save, and writes config.json. Call it only once everything that can
// be checked passed. Returns the file the run appends its metrics to.
//
// A resumed run is staged: its config goes to config.json.staged and its metrics
// history (cut at the resumed step) to metrics.jsonl.staged, and staged.json marks
// them complete; config.json, metrics.jsonl and done.json stay as they were until
// the session's first checkpoint lands and commit_staged_run() renames the staged
// files into place and removes done.json. A resume that fails at any point before
// that (bad data, divergence, a full disk, a kill) leaves a finished run exactly as
// it was, and an unfinished one with its checkpoints and metrics.
std::filesystem::path prepare_run_dir(const std::filesystem::path& dir, const RunConfig& cfg, const RunStart& start);

// After a checkpoint landed: commits what prepare_run_dir staged (nothing if nothing
// is staged). Each step can be repeated, so a kill half way is completed later.
void commit_staged_run(const std::filesystem::path& dir);

// At start, under the lock: a session killed between its first checkpoint and the
// commit is committed now (its checkpoint is newer than the step it resumed from);
// staged files of a session that never reached a checkpoint are removed.
void recover_staged_run(const std::filesystem::path& dir);

// A checkpoint's config must describe the same model; train/data changes are
// allowed (e.g. a longer max_steps) and logged.
void check_resume_compatible(const RunConfig& cfg, const json& saved, const std::string& file);

// Writes done.json (atomically).
void finish_run(const std::filesystem::path& dir, const RunSummary& summary);

// One owner per run directory (util/dir_lock.h): `train` holds the lock on out_dir
// from before it reads the directory until it returns. A directory that exists at
// start is locked there (lock_run_dir); one that does not is claimed when the run
// creates it (lock_new_run_dir), so a second trainer that decided to create the
// same directory meanwhile finds it there and is refused: whoever loses gets DirBusy
// ("out_dir ... is in use"), never a share of the directory.
using RunDirLock = DirLock;
RunDirLock lock_run_dir(const std::filesystem::path& dir);
RunDirLock lock_new_run_dir(const std::filesystem::path& dir);

}  // namespace xsagpt
