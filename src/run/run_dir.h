// The run directory of one training session, as one object that owns it from start
// to finish, so that train() never handles a lock, a staged file or a rank:
//
//   RunDir run(cfg, resume, overwrite, dist, same_config)
//       locks out_dir if it exists (before anything reads it, so no second trainer
//       decides from a state the first is changing), completes or removes what a
//       killed session staged (run/run_staging.h), and decides how the run starts
//       (run/run_start.h). Reads only. With same_config, a directory whose
//       config.json is another run's (config/config_diff.h) is refused under the lock
//       with ForeignRun: a sweep checks its point there, where no trainer started by
//       hand can slip in between the check and the start.
//   close_if_finished()   a run already at max_steps: logged, done.json made if stale.
//   restore(load)         the decided checkpoint handed to the training state's load.
//   begin()               every check passed on every rank: a directory that did not
//                         exist is claimed by creating it, and the directory is made
//                         what the run continues from (a resume staged).
//   commit(step)          after each checkpoint: the staged session becomes the run.
//   finish(summary)       done.json.
//   abandon()             another process owns the run now (a sweep point taken over):
//                         the destructor leaves what this session staged as a killed
//                         session's, for the owner to complete or remove.
//   ~RunDir               whatever way the session ends, what it staged is committed
//                         if a checkpoint of it landed, else removed; then unlocked.
//
// File work happens on rank 0 only; every rank constructs the object and calls the
// same methods, and a failure there (DirBusy, ConfigError) is thrown on every rank
// alike, so a sweep goes on the same way everywhere. The files are those of
// run/run_paths.h.
#pragma once

#include "config/run_config.h"
#include "distributed/context.h"
#include "run/done_json.h"
#include "run/run_paths.h"
#include "run/run_start.h"
#include "util/dir_lock.h"

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace xsagpt {

// out_dir holds a run of another config than the one asked for with same_config:
// nothing of it was touched.
struct ForeignRun : ConfigError {
  using ConfigError::ConfigError;
};

class RunDir {
 public:
  // resume: "", "auto" or a checkpoint path; overwrite: --overwrite; branch_from: another
  // run's checkpoint to start from while out_dir has none (run/run_start.h).
  RunDir(const RunConfig& cfg, const std::string& resume, bool overwrite, DistContext& dist, bool same_config = false,
         const std::string& branch_from = "");
  ~RunDir();
  RunDir(const RunDir&) = delete;
  RunDir& operator=(const RunDir&) = delete;

  // The summary of a run that already reached max_steps (after logging so, and
  // writing done.json where it was missing or stale), or nullopt.
  std::optional<RunSummary> close_if_finished();
  // Hands the checkpoint decided on and its file to `load` (not called for a fresh
  // start), frees its host copy, and returns the run's id. A callback, so the run
  // directory knows the checkpoint but not the training state it goes into.
  std::string restore(const std::function<void(const Checkpoint&, const std::string&)>& load);
  // Claims and prepares the directory; returns the file metrics lines go to (on rank
  // 0; empty on the others).
  std::filesystem::path begin();
  // After the checkpoint of `step` landed.
  void commit(int64_t step);
  void finish(const RunSummary& summary);
  void abandon() { abandoned_ = true; }

 private:
  // Takes the lock with `lock_fn` on rank 0; every rank learns whether it failed.
  template <class LockFn>
  void take_lock(LockFn&& lock_fn);

  const RunConfig& cfg_;
  DistContext& dist_;
  RunPaths paths_;
  DirLock lock_;          // held for the object's life: released after the destructor's recovery
  bool existed_ = false;  // out_dir was a directory at start
  bool begun_ = false;    // begin() prepared the directory: the destructor recovers
  bool abandoned_ = false;  // abandon(): the destructor leaves it all to the run's new owner
  RunOpening opening_;
};

}  // namespace xsagpt
