// metrics.jsonl: one JSON object per line, written through to the file as logged,
// for plots and scripts. Train lines carry step, tokens, time_s, train_loss, lr,
// grad_norm, tokens_per_s, mfu (and muon_lr with train.optimizer=muon); val lines carry step, tokens, time_s,
// val_loss, and the similarity bias cos_y_v and XSA gates xsa_gate (train/eval_diagnostics.h).
//
// Nothing is lost silently: a line that cannot be written (full disk, I/O error)
// is cut off again, so the file never ends mid-line, and MetricsError stops the
// run naming the file and the cause. The history is read back, and cut atomically when
// a resumed run drops what followed its checkpoint, by run/metrics_history.h.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <stdexcept>
#include <string>

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


}  // namespace xsagpt
