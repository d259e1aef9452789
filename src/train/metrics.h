// metrics.jsonl: one JSON object per line, flushed as written, for plots and
// scripts. Train lines carry step, tokens, time_s, train_loss, lr, grad_norm,
// tokens_per_s, mfu; val lines carry step, tokens, time_s, val_loss.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace xsagpt {

class MetricsLog {
 public:
  MetricsLog() = default;  // inactive (ranks other than 0)
  // Opens for appending. With resume_step >= 0, lines past that step (written
  // after the checkpoint being resumed) are dropped first.
  MetricsLog(const std::filesystem::path& path, int64_t resume_step);
  void write(const nlohmann::json& line);

 private:
  std::ofstream out_;
};

}  // namespace xsagpt
