// metrics.jsonl: one JSON object per line, written through to the file as logged,
// for plots and scripts. Train lines carry step, tokens, time_s, train_loss, lr,
// grad_norm, tokens_per_s, mfu (and muon_lr with train.optimizer=muon); val lines carry step, tokens, time_s,
// val_loss, and the similarity bias cos_y_v and XSA gates xsa_gate (train/eval_diagnostics.h).
//
// Nothing is lost silently: a line that cannot be written (full disk, I/O error)
// is cut off again, so the file never ends mid-line, and MetricsError stops the
// run naming the file and the cause. The history is rewritten only atomically
// (temporary file + rename), when a resumed run drops what followed its checkpoint.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace xsagpt {

struct MetricsError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class MetricsLog {
 public:
  MetricsLog() = default;                                  // inactive (ranks other than 0)
  explicit MetricsLog(const std::filesystem::path& path);  // opens for appending, creating it if needed
  MetricsLog(MetricsLog&& o) noexcept;
  MetricsLog& operator=(MetricsLog&& o) noexcept;
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  ~MetricsLog();

  void write(const nlohmann::json& line);  // throws MetricsError

 private:
  int fd_ = -1;
  std::filesystem::path path_;
};

// Keeps the lines of steps <= `step`, rewriting the file atomically; nothing happens
// without a file. A damaged line (a line cut off by a kill, garbage, NUL bytes:
// anything that is not a JSON object with an integer "step") is not kept, and is
// returned byte for byte with its line number, for the caller to keep and report.
struct MetricsCut {
  std::vector<int64_t> damaged_lines;  // 1-based line numbers in the file as it was
  std::string damaged;                 // those lines, each ended by a newline
  int64_t last_step = -1;              // the largest step of a kept line; -1: none kept
};
MetricsCut truncate_metrics(const std::filesystem::path& path, int64_t step);

// "3, 7-9, 12": line numbers for messages.
std::string line_ranges(const std::vector<int64_t>& lines);

// The last train_loss and val_loss logged at exactly `step`, if the file has them.
struct LoggedLosses {
  std::optional<double> train_loss, val_loss;
};
LoggedLosses losses_at_step(const std::filesystem::path& path, int64_t step);

}  // namespace xsagpt
