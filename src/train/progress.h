// What the training loop reports: the console line every train.log_interval steps
// (loss, learning rate, gradient norm, tokens/s, MFU, ETA), the val loss, and the
// same as lines of metrics.jsonl (run/metrics.h, rank 0 only). Losses and norms
// stay on the device between log lines, and a non-finite one is remembered there
// (its step) without a host sync; check_finite() reads it where a log line or a
// checkpoint has to wait for the GPU anyway. Time spent evaluating or saving is
// left out of tokens/s (pause()).
//
// It is also a stateful part of the run (run/progress_state.h): the losses last
// logged, the train-loss window, the training time, the run id and the resumes that
// changed the number of ranks go into every checkpoint through state() and come back
// through load_state(), so nothing of them passes through the training loop.
#pragma once

#include "config/run_config.h"
#include "distributed/context.h"
#include "run/metrics.h"
#include "run/progress_state.h"
#include "train/step.h"

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace xsagpt {

class Progress {
 public:
  // The tokens of an optimizer step over all ranks and the FLOPs they take (for the
  // MFU, on GPUs of a known peak) follow from the config, the runtime and the world.
  Progress(const RunConfig& cfg, const Runtime& rt, DistContext& dist, torch::Device device);

  // Before start(): the state of a checkpoint, then the id of the run it continues
  // (run/run_dir.h decides it; checkpoints of older versions carry none).
  void load_state(const ProgressState& s);
  void set_run_id(std::string id) { run_id_ = std::move(id); }
  // Before start(): this session continues the run on another number of ranks.
  void add_rank_change(const RankChange& c) { rank_changes_.push_back(c); }
  const std::vector<RankChange>& rank_changes() const { return rank_changes_; }
  // For a checkpoint; every rank calls it (the window's sum is averaged over ranks).
  ProgressState state();

  // Starts the clocks; metrics lines are appended to `metrics_path` on rank 0 (a
  // resumed run's is staged, run/run_staging.h).
  void start(const std::filesystem::path& metrics_path);
  // A finished optimizer step (its number, counting from 1).
  void record(int64_t step, const StepStats& stats);
  // The train line over the steps since the last one (the checkpoint's window
  // included, so a resumed run averages the steps an uninterrupted run averages).
  void log_train(int64_t step, int64_t tokens, double lr);
  // `extra`: more fields of the val line (train/eval_diagnostics.h).
  void log_val(int64_t step, int64_t tokens, double val_loss, const nlohmann::json& extra = nlohmann::json::object());
  // That the run stopped on a signal after `step`, and how to continue it.
  void log_stop(int64_t step, int signal) const;
  // Throws naming the first step whose loss or gradient norm was not finite.
  void check_finite();
  // Restarts the throughput clock (after evaluating or saving).
  void pause() { interval_start_ = Clock::now(); }
  // Training time so far, earlier sessions included.
  double elapsed() const;
  // The losses last logged (NaN before the first).
  double train_loss() const { return train_loss_; }
  double val_loss() const { return val_loss_; }

 private:
  using Clock = std::chrono::steady_clock;
  const RunConfig& cfg_;
  DistContext& dist_;
  MetricsLog metrics_;
  int64_t step_tokens_;
  double flops_per_step_;
  std::optional<double> peak_flops_;
  double elapsed_before_ = 0;
  double train_loss_ = NAN, val_loss_ = NAN;
  std::string run_id_;
  std::vector<RankChange> rank_changes_;
  Clock::time_point start_ = Clock::now(), interval_start_ = Clock::now();
  int64_t interval_steps_ = 0;  // steps since the throughput clock started (this session)
  int64_t window_steps_ = 0;    // steps whose losses loss_sum_ holds (earlier sessions' too)
  torch::Tensor loss_sum_, grad_norm_, bad_step_;
};

}  // namespace xsagpt
