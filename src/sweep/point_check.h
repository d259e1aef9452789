// Sweeps, whether a point's directory holds the point's run, and whether a finished
// run can be compared. A sweep may meet a directory it did not make (a run trained
// there by hand, another sweep's, a copy) and a finished run whose files were cut
// short or edited; a comparison built on either would be wrong without a word. So
// the sweep checks each point when it reaches it, and the summary checks each run
// before it uses it, both here, and say why a run is left out.
#pragma once

#include "sweep/grid.h"

#include <optional>
#include <string>

namespace xsagpt {

// Why the run in p's directory is not p's: its config.json is unreadable or another
// resolved config than p's (out_dir aside: a moved sweep is still itself); nullopt
// when the directory holds no config.json yet, or p's.
std::optional<std::string> foreign_run(const SweepPoint& p);

// Why a finished run (its done.json as read) cannot be compared: foreign_run; a
// done.json that is no JSON object (named by line where it holds a literal NaN or
// Infinity, util/json_read.h); a step other than train.max_steps; a final loss that is
// not a finite number; a metrics.jsonl with a line holding a literal NaN or Infinity
// (the trainer writes null), or whose val curve does not end at done.json's step,
// tokens and val loss, or holds a val loss that is not a finite number. nullopt: every check holds,
// so equal-time and equal-token readings of its curve reach its end.
std::optional<std::string> unusable_run(const SweepPoint& p, const json& done);

// Where a point stands, in one word for every reader: the summary, --status, --summarize's
// list of what it left out, the Slurm submitter and the tuning rungs.
enum class PointStatus { kDone, kRunning, kPending, kFailed, kInvalid };
const char* status_name(PointStatus s);  // "done", "running", "pending", "failed", "invalid"

struct PointState {
  PointStatus status = PointStatus::kPending;
  std::string detail;  // the final val loss; the holder, step and heartbeat; why; ...
  // For a point that has ended, what the summary records of it: done.json's
  // final_train_loss, final_val_loss, tokens, wall_s and step where there is a done.json,
  // and "error" for an invalid or failed point.
  json record = json::object();
  const char* name() const { return status_name(status); }
};

// A point that has come to an end: done, a run that every check holds; invalid, a run of
// another config or one that fails a check; failed (sweep/grid.h's failed.json). nullopt:
// pending or running, which the lock tells (sweep/status.h's point_state).
std::optional<PointState> ended_state(const SweepPoint& p);

}  // namespace xsagpt
