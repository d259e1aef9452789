// What the training loop reports: the console line every train.log_interval steps
// (loss, learning rate, gradient norm, tokens/s, MFU, ETA), the val loss, and the
// same as lines of metrics.jsonl (train/metrics.h, rank 0 only). Losses and norms
// stay on the device between log lines, and a non-finite one is remembered there
// (its step) without a host sync; check_finite() reads it where a log line or a
// checkpoint has to wait for the GPU anyway. Time spent evaluating or saving is
// left out of tokens/s (pause()).
#pragma once

#include "config/run_config.h"
#include "dist/context.h"
#include "train/checkpoint.h"
#include "train/metrics.h"
#include "train/step.h"

#include <chrono>
#include <filesystem>
#include <optional>

namespace xsagpt {

class Progress {
 public:
  // step_tokens: tokens per optimizer step over all ranks; flops_per_step and
  // peak_flops (per rank, none off GPUs) give the MFU; elapsed_before: training
  // time of earlier sessions of the run; metrics_path: the file metrics lines are
  // appended to (rank 0; a resumed run's is staged, train/run_dir.h).
  Progress(const RunConfig& cfg, DistContext& dist, torch::Device device, int64_t step_tokens, double flops_per_step,
           std::optional<double> peak_flops, double elapsed_before, const std::filesystem::path& metrics_path);

  // A finished optimizer step (its number, counting from 1).
  void record(int64_t step, const StepStats& stats);
  // The train line over the steps since the last one; returns the mean loss.
  double log_train(int64_t step, int64_t tokens, double lr);
  // The steps since the last train line, for a checkpoint (every rank calls it: the
  // sum is averaged over ranks), and, on resume, those of the checkpoint: the next
  // line then averages the same steps an uninterrupted run averages.
  TrainWindow window();
  void restore_window(const TrainWindow& w);
  void log_val(int64_t step, int64_t tokens, double val_loss);
  // Throws naming the first step whose loss or gradient norm was not finite.
  void check_finite();
  // Restarts the throughput clock (after evaluating or saving).
  void pause() { interval_start_ = Clock::now(); }
  // Training time so far, earlier sessions included.
  double elapsed() const;

 private:
  using Clock = std::chrono::steady_clock;
  const RunConfig& cfg_;
  DistContext& dist_;
  MetricsLog metrics_;
  int64_t step_tokens_;
  double flops_per_step_;
  std::optional<double> peak_flops_;
  double elapsed_before_;
  Clock::time_point start_ = Clock::now(), interval_start_ = Clock::now();
  int64_t interval_steps_ = 0;  // steps since the throughput clock started (this session)
  int64_t window_steps_ = 0;    // steps whose losses loss_sum_ holds (earlier sessions' too)
  torch::Tensor loss_sum_, grad_norm_, bad_step_;
};

}  // namespace xsagpt
