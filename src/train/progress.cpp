#include "train/progress.h"

#include "model/counts.h"
#include "optim/schedule.h"
#include "run/checkpoint.h"
#include "train/mfu.h"
#include "util/device.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>

namespace xsagpt {

namespace {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  auto s = static_cast<int64_t>(seconds);
  if (s >= 3600) return fmt::format("{}h{:02d}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02d}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

std::string human_rate(double x) {
  if (x >= 1e6) return fmt::format("{:.2f}M", x / 1e6);
  if (x >= 1e3) return fmt::format("{:.1f}K", x / 1e3);
  return fmt::format("{:.0f}", x);
}

}  // namespace

Progress::Progress(const RunConfig& cfg, const Runtime& rt, DistContext& dist, torch::Device device)
    : cfg_(cfg),
      dist_(dist),
      step_tokens_(cfg.tokens_per_step(dist.world_size())),
      flops_per_step_(flops_per_token(cfg.model, cfg.train.seq_len) * static_cast<double>(step_tokens_)),
      peak_flops_(device.is_cuda() ? gpu_peak_flops(device_name(device), rt.bf16) : std::nullopt) {
  auto opts = torch::TensorOptions().device(device);
  loss_sum_ = torch::zeros({}, opts.dtype(torch::kFloat32));
  bad_step_ = torch::full({}, -1, opts.dtype(torch::kLong));
}

void Progress::load_state(const ProgressState& s) {
  elapsed_before_ = s.elapsed_s;
  train_loss_ = s.train_loss;
  val_loss_ = s.val_loss;
  loss_sum_.fill_(s.window.loss_sum);
  window_steps_ = s.window.steps;
  run_id_ = s.run_id;
  rank_changes_ = s.rank_changes;
}

ProgressState Progress::state() {
  const TrainWindow window{dist_.mean(loss_sum_).item<double>(), window_steps_};
  return {elapsed(), train_loss_, val_loss_, window, run_id_, rank_changes_};
}

void Progress::start(const std::filesystem::path& metrics_path) {
  if (dist_.is_main()) metrics_ = MetricsLog(metrics_path);
  start_ = interval_start_ = Clock::now();
}

void Progress::record(int64_t step, const StepStats& stats) {
  loss_sum_ += stats.loss;
  grad_norm_ = stats.grad_norm;
  bad_step_ = torch::where((bad_step_ < 0) & ~(torch::isfinite(stats.loss) & torch::isfinite(stats.grad_norm)),
                           torch::full_like(bad_step_, step), bad_step_);
  ++interval_steps_;
  ++window_steps_;
}

void Progress::check_finite() {
  if (const auto bad = bad_step_.item<int64_t>(); bad >= 0)
    throw std::runtime_error(fmt::format("loss or gradient norm is not finite at step {}; stopping. {}", bad,
                                         last_good_checkpoint(cfg_.out_dir)));
}

double Progress::elapsed() const {
  return elapsed_before_ + std::chrono::duration<double>(Clock::now() - start_).count();
}

void Progress::log_train(int64_t step, int64_t tokens, double lr) {
  check_finite();
  const auto steps = static_cast<double>(std::max<int64_t>(1, interval_steps_));
  const double loss = dist_.mean(loss_sum_).item<double>() / static_cast<double>(std::max<int64_t>(1, window_steps_));
  const double norm = grad_norm_.defined() ? grad_norm_.item<double>() : NAN;
  const double dt = std::chrono::duration<double>(Clock::now() - interval_start_).count();
  const double tok_s = steps * static_cast<double>(step_tokens_) / dt;
  std::optional<double> mfu;
  if (peak_flops_) mfu = flops_per_step_ * steps / dt / (*peak_flops_ * static_cast<double>(dist_.world_size()));
  if (dist_.is_main()) {
    const double eta = dt / steps * static_cast<double>(cfg_.train.max_steps - step);
    const bool muon = cfg_.train.optimizer == Optimizer::kMuon;
    const double muon_lr = muon_learning_rate(cfg_.train, lr);
    spdlog::info("step {:>6}/{} | loss {:.4f} | lr {:.2e}{} | norm {:.3f} | {} tok/s | MFU {} | ETA {}", step,
                 cfg_.train.max_steps, loss, lr, muon ? fmt::format(" | muon lr {:.2e}", muon_lr) : "", norm,
                 human_rate(tok_s), mfu ? fmt::format("{:.1f}%", *mfu * 100) : "n/a", format_duration(eta));
    json line = {
        {"step", step}, {"tokens", tokens},  {"time_s", elapsed()},   {"train_loss", loss},
        {"lr", lr},     {"grad_norm", norm}, {"tokens_per_s", tok_s}, {"mfu", mfu ? json(*mfu) : json(nullptr)}};
    if (muon) line["muon_lr"] = muon_lr;
    metrics_.write(line);
  }
  loss_sum_.zero_();
  interval_steps_ = 0;
  window_steps_ = 0;
  interval_start_ = Clock::now();
  train_loss_ = loss;
}

void Progress::log_val(int64_t step, int64_t tokens, double val_loss, const nlohmann::json& extra) {
  val_loss_ = val_loss;
  if (dist_.is_main()) {
    spdlog::info("step {:>6}/{} | val loss {:.4f}", step, cfg_.train.max_steps, val_loss);
    nlohmann::json line = {{"step", step}, {"tokens", tokens}, {"time_s", elapsed()}, {"val_loss", val_loss}};
    line.update(extra);
    metrics_.write(line);
  }
  pause();  // evaluation time is not training throughput
}

void Progress::log_stop(int64_t step, int signal) const {
  if (dist_.is_main())
    spdlog::warn("stopped by {} after step {}; resume with --resume auto",
                 signal ? fmt::format("signal {}", signal) : "a signal to another rank", step);
}

}  // namespace xsagpt
