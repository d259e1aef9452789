// Running a sweep's points and writing its results (see sweep/run.h).
#include "sweep/run.h"

#include "sweep/point_check.h"
#include "sweep/point_run.h"
#include "sweep/progress.h"
#include "sweep/results.h"
#include "sweep/sweep_claim.h"
#include "sweep/status.h"
#include "train/signals.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace xsagpt {

namespace fs = std::filesystem;

namespace {

// A point whose directory was made with another resolved config (the sweep's set,
// its base file or a default changed) is stale: refused, or with force rerun.
// Only out_dir may differ: a moved sweep's points continue where they are.
bool stale_point(const Sweep& sweep, const SweepPoint& p, bool force) {
  const auto foreign = foreign_run(p);
  if (!foreign) return false;
  if (!force)
    throw ConfigError(fmt::format("{}: point {} was run with another config than the sweep now resolves: {}; "
                                  "use another out_dir, or --force to run the changed points again",
                                  sweep.dir.string(), p.name, *foreign));
  return true;
}

std::vector<bool> stale_points(const Sweep& sweep, bool force) {
  std::vector<bool> stale(sweep.points.size(), false);
  SweepProgress progress(sweep.dir.string() + ": checking the points' directories", sweep.points.size());
  for (size_t i = 0; i < sweep.points.size(); ++i) {
    stale[i] = stale_point(sweep, sweep.points[i], force);
    progress.step();
  }
  return stale;
}

std::string point_tag(const Sweep& sweep, size_t i) {
  return fmt::format("[{}/{}] {}", i + 1, sweep.points.size(), sweep.points[i].name);
}

// Everything a sweep or a point does before its first point: the sweep file claimed,
// the stop signals caught (one arriving between points ends the sweep there, as one
// arriving in a point does), the live view named.
void start(const Sweep& sweep, const SweepRunOptions& opts, DistContext& dist) {
  install_stop_handlers();
  claim_sweep_file(sweep, opts.force, dist);
  if (dist.is_main() && !opts.watch_hint.empty())
    spdlog::info("watch it live: {}  (or --wandb PROJECT)", opts.watch_hint);
}

int interrupted(DistContext& dist) {
  if (dist.is_main()) spdlog::warn("sweep interrupted; run the same command again to continue");
  return kSweepInterrupted;
}

// Files point i's outcome in `u`, a branch that waits in `waiting`; false when the
// sweep was stopped.
bool file_outcome(PointOutcome outcome, size_t i, const Sweep& sweep, Unfinished& u, std::vector<size_t>& waiting) {
  const auto& name = sweep.points[i].name;
  switch (outcome) {
    case PointOutcome::kFinished: break;
    case PointOutcome::kFailed: u.failed.push_back(name); break;
    case PointOutcome::kBusy: u.busy.push_back(name); break;
    case PointOutcome::kForeign: u.foreign.push_back(name); break;
    case PointOutcome::kWaiting: waiting.push_back(i); break;
    case PointOutcome::kInterrupted: return false;
  }
  return true;
}

// 5 s, a stop signal heard within 0.1 s; false if one was.
bool pause_between_looks(DistContext& dist) {
  for (int s = 0; s < 50; ++s) {
    if (dist.any(stop_requested())) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return true;
}

// Branches passed by because their checkpoint was not there (sweep/branch.h): while
// a live process (another on the same directory) trains a source, the sweep waits and
// tries its branches again, so that processes side by side finish every point between
// them. Returns false when stopped by a signal; `u` gets the branches left waiting.
bool revisit_branches(const Sweep& sweep, const std::vector<bool>& stale, const SweepRunOptions& opts,
                      const PointLockTiming& timing, std::vector<size_t> waiting, Unfinished& u, DistContext& dist) {
  while (!waiting.empty()) {
    bool live = false;
    for (const auto i : waiting) {
      bool source_live = false;
      if (dist.is_main()) branch_wait(sweep, sweep.points[i], &source_live);
      live |= dist.any(source_live);
    }
    if (!live) break;  // nothing in progress will make their checkpoints
    if (!pause_between_looks(dist)) return false;
    std::vector<size_t> still;
    for (const auto i : waiting) {
      const PointRun run{stale[i], opts.retry_failed, true, point_tag(sweep, i), timing};
      if (!file_outcome(run_point(sweep, sweep.points[i], run, dist), i, sweep, u, still)) return false;
    }
    waiting = std::move(still);
  }
  for (const auto i : waiting) u.waiting.push_back(sweep.points[i].name);
  return true;
}

}  // namespace

bool wait_for_tuning(const Sweep& sweep, DistContext& dist) {
  bool live = false;
  if (dist.is_main() && sweep.ladder && sweep.ladder->tune_rungs) {
    const auto timing = point_lock_timing();
    const auto clock = sweep_lock_clock(sweep);
    for (const auto& p : sweep.points)
      if (p.rung >= 0 && tunes_at(*sweep.ladder, static_cast<size_t>(p.rung)) &&
          point_state(sweep, p, timing, clock).status == PointStatus::kRunning) {
        live = true;
        break;
      }
  }
  return dist.any(live) && pause_between_looks(dist);
}

int run_sweep(const Sweep& sweep, const SweepRunOptions& opts, DistContext& dist) {
  start(sweep, opts, dist);
  const auto stale = stale_points(sweep, opts.force);
  const auto timing = point_lock_timing();
  Unfinished u;
  std::vector<size_t> waiting;
  for (size_t i = 0; i < sweep.points.size(); ++i) {
    if (dist.any(stop_requested())) return interrupted(dist);
    const auto& p = sweep.points[i];
    const PointRun run{stale[i], opts.retry_failed, true, point_tag(sweep, i), timing};
    if (!file_outcome(run_point(sweep, p, run, dist), i, sweep, u, waiting)) return interrupted(dist);
  }
  if (!revisit_branches(sweep, stale, opts, timing, waiting, u, dist)) return interrupted(dist);
  report_end(sweep, u, opts.plot, dist);
  return u.clean() ? kSweepDone : kSweepIncomplete;
}

int run_sweep_point(const Sweep& sweep, size_t index, const SweepRunOptions& opts, DistContext& dist) {
  const auto timing = point_lock_timing();  // a bad setting is refused before anything is written
  start(sweep, opts, dist);
  const auto& p = sweep.points.at(index);
  const PointRun run{stale_point(sweep, p, opts.force), opts.retry_failed, false, point_tag(sweep, index), timing};
  if (dist.any(stop_requested())) return interrupted(dist);
  switch (run_point(sweep, p, run, dist)) {
    case PointOutcome::kFinished:
      if (dist.is_main()) spdlog::info("{}: done; --summarize writes the sweep's summary", run.tag);
      return kSweepDone;
    case PointOutcome::kInterrupted: return interrupted(dist);
    default: return kSweepIncomplete;
  }
}

size_t find_point(const Sweep& sweep, const std::string& which, const std::string& option) {
  const auto n = sweep.points.size();
  if (!which.empty() && std::all_of(which.begin(), which.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (which.size() > 18 || std::stoull(which) >= n)
      throw ConfigError(fmt::format("{}: point index {} is out of range: the sweep has {} point(s), 0 to {} "
                                    "(see --dry-run)",
                                    option, which, n, n - 1));
    return std::stoull(which);
  }
  for (size_t i = 0; i < n; ++i)
    if (sweep.points[i].name == which) return i;
  throw ConfigError(fmt::format("{}: expected a point's index (0 to {}) or its name as --dry-run lists it, got "
                                "\"{}\"",
                                option, n - 1, which));
}

}  // namespace xsagpt
