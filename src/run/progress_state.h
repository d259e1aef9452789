// What the progress part of a run (train/progress.h) carries across a restart: the
// losses last logged, the steps since the last train-loss line, the training time,
// and the id of the run. A checkpoint holds it (run/checkpoint.h), so a resumed
// run logs what an uninterrupted one logs and a checkpoint of the final step can
// make done.json on its own.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

namespace xsagpt {

// The steps since the last train-loss log line.
struct TrainWindow {
  double loss_sum = 0;  // a float32 sum, exact in a double
  int64_t steps = 0;
};

struct ProgressState {
  double elapsed_s = 0;                     // training wall time so far, all sessions
  double train_loss = NAN, val_loss = NAN;  // the last logged; NaN before the first
  TrainWindow window;
  std::string run_id;  // the run the state belongs to (run/run_paths.h: run.json)
};

}  // namespace xsagpt
