#include "eval/progress.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <unistd.h>
#include <cstdio>

namespace xsagpt::eval {

Progress::Progress(std::string label)
    : label_(std::move(label)),
      tty_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

void Progress::update(size_t done, size_t total) {
  const auto now = std::chrono::steady_clock::now();
  const double secs = std::chrono::duration<double>(now - start_).count();
  const double frac = total ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
  if (tty_) {
    if (done < total && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(frac * kWidth);
    const double eta = done ? secs / static_cast<double>(done) * static_cast<double>(total - done) : 0;
    std::fprintf(stderr, "\r%s |%s%s| %zu/%zu %.0fs, eta %.0fs ", label_.c_str(), std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, ' ').c_str(), done, total, secs, eta);
    std::fflush(stderr);
    open_ = true;
    return;
  }
  const auto tenth = static_cast<size_t>(frac * 10);
  if (tenth <= last_tenth_ && done < total) return;
  last_tenth_ = tenth;
  spdlog::info("{}: {}/{} ({:.0f}%), {:.0f} s", label_, done, total, 100 * frac, secs);
}

void Progress::finish() {
  if (tty_ && open_) std::fprintf(stderr, "\n");
  open_ = false;
}

}  // namespace xsagpt::eval
