// The training loop: data -> forward/backward with gradient accumulation ->
// global-norm clip -> the optimizer (AdamW, or Muon for the block matrices plus
// AdamW: train.optimizer) at the scheduled rate, with periodic evaluation on a
// fixed validation set, metrics, checkpoints, and exact resume.
#pragma once

#include "config/run_config.h"
#include "distributed/context.h"

#include <filesystem>
#include <functional>
#include <string>

namespace xsagpt {

struct TrainOptions {
  std::string resume;      // "", "auto", or a checkpoint path
  bool overwrite = false;  // start over in an out_dir that already holds a run
  // Continue only a run of this very config (out_dir aside): another one in out_dir
  // is refused with ForeignRun (run/run_dir.h). A sweep's points ask for this.
  bool same_config = false;
  // With resume "auto": another run's checkpoint to start from while out_dir has none of
  // its own, as a branch of that run (run/run_start.h: open_run).
  std::string branch_from;
  // Whether this process may still write into the run, asked (on every rank, collectively)
  // before the run directory is first written, before each step's lines and checkpoint, and
  // before done.json: a sweep's point asks its lock (sweep/point_lock.h). Once it says no,
  // the run writes nothing more and ends as lost. Empty: always.
  std::function<bool()> still_held;
};

struct TrainResult {
  int64_t step = 0;
  bool finished = false;  // reached max_steps (false: stopped by a signal, or lost)
  double final_train_loss = NAN, final_val_loss = NAN;
  bool lost = false;  // stopped because still_held said no: another process owns the run now
};

TrainResult train(const RunConfig& cfg, const TrainOptions& opts, DistContext& dist);

}  // namespace xsagpt
