// Progress lines for large grids (see sweep/progress.h).
#include "sweep/progress.h"

#include <spdlog/spdlog.h>

namespace xsagpt {

namespace {

constexpr auto kEvery = std::chrono::seconds(5);

}  // namespace

SweepProgress::SweepProgress(std::string what, size_t total)
    : what_(std::move(what)), total_(total), shown_(total >= kProgressFrom), last_(std::chrono::steady_clock::now()) {
  if (shown_) spdlog::info("{}: {} points", what_, total_);
}

void SweepProgress::step() {
  ++done_;
  if (!shown_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_ < kEvery && done_ != total_) return;
  last_ = now;
  spdlog::info("{}: {} of {}", what_, done_, total_);
}

}  // namespace xsagpt
