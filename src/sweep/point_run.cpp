// Sweeps, one point: checks, lock, training, outcome (see sweep/point_run.h).
#include "sweep/point_run.h"

#include "run/run_dir.h"
#include "run/run_paths.h"
#include "sweep/branch.h"
#include "sweep/point_check.h"
#include "sweep/status.h"
#include "sweep/summary.h"
#include "train/signals.h"
#include "train/trainer.h"
#include "util/dir_lock.h"
#include "util/test_stop.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace xsagpt {

namespace fs = std::filesystem;

namespace {

// Whether a stop signal came while a step failed. On several ranks the failure may be the
// signal's leading edge (a peer that stopped first), so this rank waits up to 2 s for its
// own copy of the signal; one rank alone needs no wait.
bool stopped_with_the_others(const DistContext& dist) {
  if (stop_requested() || dist.world_size() == 1) return stop_requested();
  for (int i = 0; i < 20 && !stop_requested(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return stop_requested();
}

// Whether a point is left as it is before any training: a run of another config in its
// directory, a finished run, or an earlier failure not being retried. Returns the outcome
// that ends the point, or nullopt to train it.
std::optional<PointOutcome> settled(const SweepPoint& p, bool stale, bool retry, const std::string& tag, bool main) {
  if (stale) return std::nullopt;
  // Checked again when the point is reached: a run trained into its directory by hand
  // since the sweep started is not this point's, finished or not, and is left as it
  // is (force reruns only what was stale at the start). The trainer checks once
  // more under its lock (same_config), for a run that slips in after this.
  if (const auto why = foreign_run(p)) {
    if (main) spdlog::error("{}: refused, not run and not recorded as failed: {}", tag, *why);
    return PointOutcome::kForeign;
  }
  if (fs::exists(RunPaths(p.config.out_dir).done)) {
    if (main) {
      spdlog::info("{}: finished, skipping", tag);
      clear_failure(p);  // a record of an earlier attempt says nothing about a finished point
    }
    return PointOutcome::kFinished;
  }
  if (!retry)
    if (const auto failure = point_failure(p)) {
      if (main)
        spdlog::warn("{}: failed before ({}), skipping; --retry-failed runs it again", tag,
                     failure->value("error", json("unknown")).get<std::string>());
      return PointOutcome::kFailed;
    }
  return std::nullopt;
}

// Trains one point: a stale one starts over (overwrite), any other continues what its
// directory holds. `lock`: the point's lock on rank 0 (empty elsewhere), which the
// trainer asks before each write into the run.
PointOutcome train_point(const Sweep& sweep, const SweepPoint& p, const PointRun& run, PointLock* lock,
                         DistContext& dist) {
  const bool stale = run.stale;
  const auto& tag = run.tag;
  TrainOptions opts = stale ? TrainOptions{"", true} : TrainOptions{"auto", false, true};
  if (p.branch_of) {
    // Every rank agrees on rank 0's reading of the source's directory.
    std::string why;
    if (dist.is_main()) {
      const auto file = branch_checkpoint(sweep, p);
      if (const auto wait = branch_wait(sweep, p))
        why = *wait;
      else if (stale && !fs::exists(file))
        why = "waits for " + file.string();  // its own checkpoints are stale
    }
    if (dist.any(!why.empty())) {
      if (dist.is_main()) spdlog::warn("{}: not started, not recorded as failed: it {}", tag, why);
      return PointOutcome::kWaiting;
    }
    opts.branch_from = branch_checkpoint(sweep, p).string();
  }
  if (dist.is_main()) spdlog::info("{}{}", tag, stale ? ": its config changed, running it again" : "");
  if (dist.is_main()) clear_failure(p);  // retried: its new outcome replaces the old record
  TrainResult result;
  stop_here_for_tests("sweep:point-checked");
  try {
    opts.still_held = [lock] { return !lock || lock->held(); };  // every rank asks; rank 0 holds the lock
    result = train(p.config, opts, dist);
  } catch (const ForeignRun& e) {
    if (dist.is_main()) spdlog::error("{}: refused, not run and not recorded as failed: {}", tag, e.what());
    return PointOutcome::kForeign;
  } catch (const DirBusy& e) {
    // Another process (a trainer started by hand) owns the point: not this point's
    // failure, and nothing of it is touched.
    if (dist.is_main()) spdlog::warn("{}: skipped, not recorded as failed: {}", tag, e.what());
    return PointOutcome::kBusy;
  } catch (const std::exception& e) {
    const std::string what = e.what();
    if (stopped_with_the_others(dist)) {
      // A stop signal goes to every rank at once (a requeue, a cancel, a preemption): a peer
      // that stopped first closes its connections, and the collective this rank was in fails.
      // That is the stop, not the point's failure: nothing is recorded, so the point resumes
      // from its last checkpoint rather than being skipped as failed.
      if (dist.is_main())
        spdlog::warn("{}: stopped by signal {} while its step failed ({}); not recorded as failed", tag, stop_signal(),
                     what);
      return PointOutcome::kInterrupted;
    }
    // One point's failure (a diverging learning rate, bad data, out of memory) is
    // that point's result: recorded, and the queue goes on.
    if (dist.is_main()) {
      spdlog::error("{}: failed: {}", tag, what);
      record_failure(p, what);
      if (run.write_summary) write_summary(sweep);
    }
    // On several ranks one rank's failure may leave the others waiting in a
    // collective: the sweep stops there rather than guess.
    if (dist.world_size() > 1) throw;
    return PointOutcome::kFailed;
  }
  if (result.lost) {
    // Another process took the point over while this one stalled: its run is theirs now.
    if (dist.is_main()) spdlog::warn("{}: skipped, not recorded as failed: this process lost the point", tag);
    return PointOutcome::kBusy;
  }
  if (dist.is_main()) {
    if (result.finished) clear_failure(p);
    if (run.write_summary) write_summary(sweep);
  }
  return result.finished ? PointOutcome::kFinished : PointOutcome::kInterrupted;
}

// Rank 0 takes the point's lock; every rank learns whether it did. Returns the lock
// (empty on other ranks) or, when another live process holds the point, nothing and
// `busy` set on every rank.
std::unique_ptr<PointLock> lock_point(const Sweep& sweep, const SweepPoint& p, const PointRun& run, bool& busy,
                                      DistContext& dist) {
  std::unique_ptr<PointLock> lock;
  if (dist.is_main()) {
    auto a = PointLock::acquire(point_lock_dir(sweep.dir, p.name), run.timing, p.config.out_dir);
    if (a.holder) {
      spdlog::warn("{}: skipped, not recorded as failed: point {} is held by {} (last heartbeat {:.0f} s ago{})",
                   run.tag, p.name, a.holder->describe(), std::max(0.0, a.holder_check.age),
                   a.holder_check.why.empty() ? "" : ": " + a.holder_check.why);
    } else if (a.taken_over) {
      spdlog::warn("{}: taking the point over from {}: {}", run.tag, a.taken_over->describe(), a.stale_why);
    }
    lock = std::move(a.lock);
  }
  busy = dist.any(dist.is_main() && !lock);
  return lock;
}

}  // namespace

PointOutcome run_point(const Sweep& sweep, const SweepPoint& p, const PointRun& run, DistContext& dist) {
  // Settled points are passed without their lock: a finished point is never trained
  // again, whoever holds its lock.
  if (const auto outcome = settled(p, run.stale, run.retry_failed, run.tag, dist.is_main())) return *outcome;
  bool busy = false;
  const auto lock = lock_point(sweep, p, run, busy, dist);
  if (busy) return PointOutcome::kBusy;
  stop_here_for_tests("sweep:point-locked");
  // Under the lock, again: another process may have finished (or failed) it since, or
  // (both forced) already run a stale point again, which is then no longer stale.
  PointRun now = run;
  now.stale = run.stale && foreign_run(p).has_value();
  if (const auto outcome = settled(p, now.stale, now.retry_failed, now.tag, dist.is_main())) return *outcome;
  return train_point(sweep, p, now, lock.get(), dist);
}

}  // namespace xsagpt
