// A line now and then while a sweep goes through a large grid before or after its
// training (resolving and checking the points, checking their directories): thousands
// of points take seconds, and a start-up that prints nothing meanwhile looks like a
// hang. Below kProgressFrom points it prints nothing, as those take well under a second.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace xsagpt {

inline constexpr size_t kProgressFrom = 1000;

class SweepProgress {
 public:
  // Logs "<what>: <total> points" at once when total is at least kProgressFrom.
  SweepProgress(std::string what, size_t total);
  // One more point done; logs "<what>: <done> of <total>" at most every few seconds.
  void step();

 private:
  std::string what_;
  size_t total_ = 0, done_ = 0;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace xsagpt
