// Running a sweep's points and writing its results (see sweep/run.h).
#include "sweep/run.h"

#include "sweep/point_check.h"
#include "sweep/point_run.h"
#include "sweep/progress.h"
#include "sweep/results.h"
#include "sweep/sweep_claim.h"
#include "train/signals.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

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

}  // namespace

int run_sweep(const Sweep& sweep, const SweepRunOptions& opts, DistContext& dist) {
  start(sweep, opts, dist);
  const auto stale = stale_points(sweep, opts.force);
  const auto timing = point_lock_timing();
  Unfinished u;
  for (size_t i = 0; i < sweep.points.size(); ++i) {
    if (dist.any(stop_requested())) return interrupted(dist);
    const auto& p = sweep.points[i];
    const PointRun run{stale[i], opts.retry_failed, true, point_tag(sweep, i), timing};
    switch (run_point(sweep, p, run, dist)) {
      case PointOutcome::kFinished: break;
      case PointOutcome::kFailed: u.failed.push_back(p.name); break;
      case PointOutcome::kBusy: u.busy.push_back(p.name); break;
      case PointOutcome::kForeign: u.foreign.push_back(p.name); break;
      case PointOutcome::kInterrupted: return interrupted(dist);
    }
  }
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
