// A progress bar on stderr for long evaluations: redrawn in place on a terminal,
// one log line per tenth otherwise (so CI logs and pipes stay short).
#pragma once

#include <chrono>
#include <string>

namespace xsagpt::eval {

class Progress {
 public:
  explicit Progress(std::string label);
  void update(size_t done, size_t total);
  void finish();  // ends the bar's line on a terminal

 private:
  std::string label_;
  size_t last_tenth_ = 0;
  bool tty_, open_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace xsagpt::eval
