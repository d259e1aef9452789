// What the progress part of a run (train/progress.h) carries across a restart: the
// losses last logged, the steps since the last train-loss line, the training time,
// the id of the run and the resumes that changed its number of ranks. A checkpoint
// holds it (run/checkpoint.h), so a resumed run logs what an uninterrupted one logs
// and a checkpoint of the final step can make done.json on its own.
#pragma once

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace xsagpt {

// The steps since the last train-loss log line.
struct TrainWindow {
  double loss_sum = 0;  // a float32 sum, exact in a double
  int64_t steps = 0;
};

// A resume after `step` that continued a run saved by `from` ranks on `to`
// (config/resume_check.h: check_resume_ranks). From there on the run's losses follow
// an uninterrupted run's to floating-point tolerance, not bit for bit.
struct RankChange {
  int64_t step = 0, from = 0, to = 0;
  bool operator==(const RankChange&) const = default;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RankChange, step, from, to)

struct ProgressState {
  double elapsed_s = 0;                     // training wall time so far, all sessions
  double train_loss = NAN, val_loss = NAN;  // the last logged; NaN before the first
  TrainWindow window;
  std::string run_id;                    // the run the state belongs to (run/run_paths.h: run.json)
  std::vector<RankChange> rank_changes;  // oldest first
};

}  // namespace xsagpt
