// Sweeps, where each point stands (see sweep/status.h).
#include "sweep/status.h"

#include "run/metrics_history.h"
#include "run/run_paths.h"
#include "sweep/branch.h"
#include "sweep/point_check.h"
#include "sweep/slurm_queue.h"
#include "sweep/slurm_requeue.h"
#include "sweep/text_table.h"
#include "util/json_read.h"
#include "util/spawn.h"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <map>

namespace xsagpt {

namespace fs = std::filesystem;

namespace {

std::string age_text(double seconds) { return fmt::format("{:.0f} s ago", std::max(0.0, seconds)); }

std::string progress_text(const SweepPoint& p) {
  const auto step = last_logged_step(RunPaths(p.config.out_dir).metrics);
  return step ? fmt::format("step {} of {}", *step, p.config.train.max_steps)
              : fmt::format("step - of {}", p.config.train.max_steps);
}

// A point that is neither done, failed nor invalid: running while a live process
// holds its lock (one that stopped beating but still holds the run directory included,
// and said so), pending otherwise (with how far an earlier process took it).
PointState unfinished_state(const Sweep& sweep, const SweepPoint& p, const PointLockTiming& timing,
                            const LockClock& clock) {
  const auto holder = read_point_lock(point_lock_dir(sweep.dir, p.name));
  const bool begun = fs::exists(RunPaths(p.config.out_dir).config);
  if (holder && !holder->released) {
    const auto check = check_holder(*holder, timing, clock, p.config.out_dir);
    if (check.live)
      return {PointStatus::kRunning, fmt::format("{}, {}, last heartbeat {}{}", holder->describe(), progress_text(p),
                                     age_text(check.age), check.why.empty() ? "" : ": " + check.why)};
    return {PointStatus::kPending, fmt::format("{}; its holder, {}, stopped: {}; the next process takes it over",
                                   begun ? progress_text(p) : "not started", holder->describe(), check.why)};
  }
  if (begun) return {PointStatus::kPending, progress_text(p) + ", resumes from its last checkpoint"};
  if (p.branch_of) {
    if (const auto why = branch_wait(sweep, p)) return {PointStatus::kPending, *why};
    return {PointStatus::kPending, "not started; branches from " + branch_checkpoint(sweep, p).string()};
  }
  return {PointStatus::kPending, "not started"};
}

}  // namespace

LockClock sweep_lock_clock(const Sweep& sweep) { return LockClock::of(sweep.dir / ".locks"); }

std::optional<std::string> branch_wait(const Sweep& sweep, const SweepPoint& p, bool* source_live) {
  if (source_live) *source_live = false;
  if (branch_ready(sweep, p)) return std::nullopt;
  const auto& source = sweep.points[*p.branch_of];
  const auto st = point_state(sweep, source, point_lock_timing(), sweep_lock_clock(sweep));
  if (source_live) *source_live = st.status == PointStatus::kRunning;
  const auto file = branch_checkpoint(sweep, p);
  const auto step = sweep.ladder->rungs[static_cast<size_t>(p.rung)].budgets[static_cast<size_t>(p.budget)].branch_step;
  return fmt::format("waits for {}, step {} of {} ({}: {})", file.string(), step, source.name,
                     st.status == PointStatus::kDone ? "done, but the checkpoint is gone; train it again (move its directory "
                                          "away) to make it"
                                                     : st.name(),
                     st.detail);
}

PointState point_state(const Sweep& sweep, const SweepPoint& p, const PointLockTiming& timing,
                       const LockClock& clock) {
  if (auto ended = ended_state(p)) return std::move(*ended);
  return unfinished_state(sweep, p, timing, clock);
}

int print_sweep_status(const Sweep& sweep) {
  const auto timing = point_lock_timing();
  const auto clock = sweep_lock_clock(sweep);
  // Slurm's view, where the sweep runs there: each queued task's state, and why it waits.
  std::map<size_t, QueuedTask> queued;
  std::string queue_note;
  if (sweep.slurm && !find_on_path("squeue").empty()) {
    try {
      queued = queued_tasks(sweep);
    } catch (const ConfigError& e) {
      queue_note = fmt::format("(Slurm's queue left out: {})\n", e.what());
    }
  }
  std::map<std::string, size_t> totals{{"done", 0}, {"running", 0}, {"pending", 0}, {"failed", 0}, {"invalid", 0}};
  const size_t width = std::to_string(sweep.points.size() - 1).size();
  for (size_t i = 0; i < sweep.points.size(); ++i) {
    const auto& p = sweep.points[i];
    auto s = point_state(sweep, p, timing, clock);
    totals[s.name()] += 1;
    if (s.status == PointStatus::kRunning || s.status == PointStatus::kPending)
      if (const auto requeues = requeue_summary(p)) s.detail += "; " + *requeues;
    if (const auto it = queued.find(i); it != queued.end()) s.detail += "; in Slurm: " + it->second.describe();
    std::cout << fmt::format("{:>{}} {:<7} {}  {}\n", i, width, s.name(), p.name, s.detail);
  }
  // A tuning ladder's larger rungs, until their variant's rate is known (sweep/ladder_tuning.h).
  for (const auto& p : sweep.waiting) {
    const auto t =
        std::find_if(sweep.tuning.begin(), sweep.tuning.end(), [&](const auto& x) { return x.variant == p.variant; });
    std::cout << fmt::format("{:>{}} {:<7} {}  its rate waits: {}\n", "-", width, "waiting", p.name, t->waits);
  }
  std::cout << queue_note;
  std::cout << fmt::format(
      "{} point(s): {} done, {} running, {} pending, {} failed, {} invalid{}\n", sweep.points.size(), totals["done"],
      totals["running"], totals["pending"], totals["failed"], totals["invalid"],
      sweep.waiting.empty() ? "" : fmt::format("; {} more wait for their tuned rate", sweep.waiting.size()));
  return 0;
}

}  // namespace xsagpt
