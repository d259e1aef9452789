// Running a sweep's points and writing its results (see sweep/run.h).
#include "sweep/run.h"

#include "run/run_dir.h"
#include "run/run_paths.h"
#include "sweep/ladder_plan.h"
#include "sweep/ladder_report.h"
#include "sweep/point_check.h"
#include "sweep/progress.h"
#include "sweep/report.h"
#include "sweep/summary.h"
#include "train/memory_check.h"
#include "train/run_check.h"
#include "train/trainer.h"
#include "util/atomic_file.h"
#include "util/device.h"
#include "util/dir_lock.h"
#include "util/paths.h"
#include "util/spawn.h"
#include "util/test_stop.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <iostream>

namespace xsagpt {

namespace fs = std::filesystem;

namespace {

void print_points(const Sweep& s, int64_t world) {
  std::cout << fmt::format("sweep {}: {} point(s) over {}\n", s.dir.string(), s.points.size(), json(s.keys).dump());
  for (const auto& p : s.points) {
    const auto& t = p.config.train;
    std::cout << fmt::format("  {:<48} attention={} lr={:g} seq_len={} micro_batch={} accumulation={} steps={}\n",
                             p.name, p.config.model.attention, t.lr, t.seq_len, t.micro_batch,
                             p.config.accumulation_steps(world), t.max_steps);
  }
}

// The dry run's checks: each point's estimate (what `xsagpt info` prints) on the
// device it would train on, so a grid over sequence lengths or sizes shows which of its
// points cannot fit before one of them is started, hours into the sweep; and first
// what train refuses at a point's start whatever the memory (train/run_check.h: its
// kernels against its model), named as train names it.
void print_memory(const Sweep& s, int64_t world) {
  std::cout << "memory, as each point would start here:\n";
  for (const auto& p : s.points) {
    const auto& t = p.config.train;
    std::string where, verdict;
    try {
      const auto device = resolve_device(t.device, "train.device");
      const auto rt = runtime_of(t, device.is_cuda());
      check_runnable(p.config, rt, device);  // what train would refuse at the point's start
      const auto bytes = device_memory(device);
      const auto m = check_memory(p.config, rt, world, device.is_cuda(), bytes, device.str());
      where = fmt::format("{:.2f} GiB", m.estimate.total() / (1024.0 * 1024 * 1024));
      if (!bytes) {
        verdict = "(device memory unknown)";
      } else {
        where += fmt::format(" of {:.1f} GiB on {}", *bytes / (1024.0 * 1024 * 1024), device.str());
        verdict = m.refusal   ? "CANNOT FIT: weights, gradients and optimizer state alone are larger"
                  : m.warning ? "MAY NOT FIT: the estimate is above the device's"
                              : "fits";
      }
    } catch (const ConfigError& e) {
      where = "-";
      verdict = e.what();
    }
    std::cout << fmt::format("  {:<48} {}  {}\n", p.name, where, verdict);
  }
}

void print_results(const json& summary) {
  auto num = [](const json& p, const char* k) {
    return p.value(k, json()).is_number() ? fmt::format("{:.4f}", p[k].get<double>()) : std::string("-");
  };
  std::cout << fmt::format("\n{:<48} {:>8} {:>10} {:>10}\n", "point", "status", "train", "val");
  for (const auto& p : summary["points"])
    std::cout << fmt::format("{:<48} {:>8} {:>10} {:>10}\n", p["name"].get<std::string>(),
                             p["status"].get<std::string>(), num(p, "final_train_loss"), num(p, "final_val_loss"));
  // Why each invalid point is left out of every comparison (sweep/point_check.h).
  for (const auto& p : summary["points"])
    if (p["status"] == "invalid")
      std::cout << fmt::format("note: {} is invalid, left out: {}\n", p["name"].get<std::string>(),
                               p["error"].get<std::string>());
  // Every variant against the baseline, paired by seed (sweep/report.h; also report.md).
  if (!summary["comparisons"].empty()) std::cout << comparison_table(summary);
  std::cout << ladder_table(summary);  // across the rungs of a ladder (sweep/ladder_report.h)
}

// Draws the sweep's figures with scripts/view/plot.py, run without a shell (the paths
// go to it as they are, whatever characters they hold); its output goes to stderr.
// A missing Python or a failed plot is a warning, not an error. Returns success.
bool plot(const fs::path& dir) {
  auto root = project_root();
  if (!root) {
    spdlog::warn("plotting skipped: scripts/view/plot.py not found beside the program");
    return false;
  }
  auto python = *root / ".venv" / "bin" / "python";
  const std::vector<std::string> argv{fs::exists(python) ? python.string() : "python3",
                                      (*root / "scripts" / "view" / "plot.py").string(), dir.string()};
  std::string shown;  // the command as one could type it, for the warning
  for (const auto& a : argv) shown += (shown.empty() ? "" : " ") + shell_quote(a);
  const auto status = run_program(argv, /*stdout_to_stderr=*/true);
  if (status != 0)
    spdlog::warn("plotting failed ({}); run: {}",
                 status < 0 ? "could not start it" : "exit status " + std::to_string(status), shown);
  return status == 0;
}

// One sweep process per sweep directory: a second one would run the same points into
// each other's locks and write the same summary files. Rank 0 takes the lock; every
// rank throws DirBusy alike when it is held.
DirLock lock_sweep_dir(const Sweep& sweep, DistContext& dist) {
  DirLock lock;
  std::string busy;
  if (dist.is_main()) {
    fs::create_directories(sweep.dir);
    try {
      lock = DirLock::acquire(sweep.dir, "sweep", [&](const std::string& holder) {
        return fmt::format(
            "sweep directory {} is in use: {} runs a sweep in it (it holds {}). Wait for it to finish, or stop it "
            "and run the same command again to continue",
            sweep.dir.string(), holder, (sweep.dir / ".lock").string());
      });
    } catch (const DirBusy& e) {
      busy = e.what();
    }
  }
  if (dist.any(!busy.empty()))
    throw DirBusy(busy.empty() ? fmt::format("sweep directory {} is in use (see rank 0)", sweep.dir.string()) : busy);
  return lock;
}

// The sweep file a directory was made from (its sweep.json) must be this one, unless
// forced; out_dir aside, as a sweep copied or moved elsewhere, its out_dir edited, is
// the same sweep. Then sweep.json is this sweep file.
void claim_sweep_file(const Sweep& sweep, bool force, DistContext& dist) {
  const auto spec_file = sweep.dir / "sweep.json";
  auto placeless = [](json spec) {
    if (spec.is_object()) spec.erase("out_dir");
    return spec;
  };
  if (fs::exists(spec_file) && placeless(read_json_file(spec_file)) != placeless(sweep.spec) && !force)
    throw ConfigError(
        fmt::format("{} was made from a different sweep file; use another out_dir, or --force to "
                    "continue with the new one",
                    sweep.dir.string()));
  if (dist.is_main()) write_file_atomic(spec_file, sweep.spec.dump(2) + "\n");
}

// A point whose directory was made with another resolved config (the sweep's set,
// its base file or a default changed) is stale: refused, or with force rerun.
// Only out_dir may differ: a moved sweep's points continue where they are.
std::vector<bool> stale_points(const Sweep& sweep, bool force) {
  std::vector<bool> stale(sweep.points.size(), false);
  SweepProgress progress(sweep.dir.string() + ": checking the points' directories", sweep.points.size());
  for (size_t i = 0; i < sweep.points.size(); ++i) {
    const auto foreign = foreign_run(sweep.points[i]);
    progress.step();
    if (!foreign) continue;
    if (!force)
      throw ConfigError(
          fmt::format("{}: point {} was run with another config than the sweep now resolves: {}; "
                      "use another out_dir, or --force to run the changed points again",
                      sweep.dir.string(), sweep.points[i].name, *foreign));
    stale[i] = true;
  }
  return stale;
}

enum class Outcome { kFinished, kFailed, kBusy, kForeign, kInterrupted };

// Whether a point is left as it is before any training: a run of another config in its
// directory, a finished run, or an earlier failure not being retried. Returns the outcome
// that ends the point, or nullopt to train it.
std::optional<Outcome> settled(const SweepPoint& p, bool stale, bool retry, const std::string& tag, bool main) {
  if (stale) return std::nullopt;
  // Checked again when the point is reached: a run trained into its directory by hand
  // since the sweep started is not this point's, finished or not, and is left as it
  // is (force reruns only what was stale at the start). The trainer checks once
  // more under its lock (same_config), for a run that slips in after this.
  if (const auto why = foreign_run(p)) {
    if (main) spdlog::error("{}: refused, not run and not recorded as failed: {}", tag, *why);
    return Outcome::kForeign;
  }
  if (fs::exists(RunPaths(p.config.out_dir).done)) {
    if (main) {
      spdlog::info("{}: finished, skipping", tag);
      fs::remove(failure_file(p));  // a record of an earlier attempt says nothing about a finished point
    }
    return Outcome::kFinished;
  }
  if (!retry)
    if (const auto failure = point_failure(p)) {
      if (main)
        spdlog::warn("{}: failed before ({}), skipping; --retry-failed runs it again", tag,
                     failure->value("error", json("unknown")).get<std::string>());
      return Outcome::kFailed;
    }
  return std::nullopt;
}

// Trains one point: a stale one starts over (overwrite), any other continues what its
// directory holds.
Outcome train_point(const Sweep& sweep, const SweepPoint& p, bool stale, const std::string& tag, DistContext& dist) {
  if (dist.is_main()) spdlog::info("{}{}", tag, stale ? ": its config changed, running it again" : "");
  if (dist.is_main()) fs::remove(failure_file(p));  // retried: its new outcome replaces the old record
  TrainResult result;
  stop_here_for_tests("sweep:point-checked");
  try {
    result = train(p.config, stale ? TrainOptions{"", true} : TrainOptions{"auto", false, true}, dist);
  } catch (const ForeignRun& e) {
    if (dist.is_main()) spdlog::error("{}: refused, not run and not recorded as failed: {}", tag, e.what());
    return Outcome::kForeign;
  } catch (const DirBusy& e) {
    // Another process (a trainer started by hand) owns the point: not this point's
    // failure, and nothing of it is touched.
    if (dist.is_main()) spdlog::warn("{}: skipped, not recorded as failed: {}", tag, e.what());
    return Outcome::kBusy;
  } catch (const std::exception& e) {
    // One point's failure (a diverging learning rate, bad data, out of memory) is
    // that point's result: recorded, and the queue goes on.
    const std::string what = e.what();
    if (dist.is_main()) {
      spdlog::error("{}: failed: {}", tag, what);
      record_failure(p, what);
      write_summary(sweep);
    }
    // On several ranks one rank's failure may leave the others waiting in a
    // collective: the sweep stops there rather than guess.
    if (dist.world_size() > 1) throw;
    return Outcome::kFailed;
  }
  if (dist.is_main()) {
    if (result.finished) fs::remove(failure_file(p));
    write_summary(sweep);
  }
  return result.finished ? Outcome::kFinished : Outcome::kInterrupted;
}

// The points that did not finish, by why.
struct Unfinished {
  std::vector<std::string> failed, busy, foreign;
  bool clean() const { return failed.empty() && busy.empty() && foreign.empty(); }
};

// The end of a sweep that went through every point: the summary, the table, the
// figures and what did not finish.
void report_end(const Sweep& sweep, const Unfinished& u, bool draw, DistContext& dist) {
  const auto n = sweep.points.size();
  if (dist.is_main()) {
    write_summary(sweep);
    print_results(sweep_summary(sweep));
    std::cout << fmt::format("summary: {}\n", (sweep.dir / "summary.json").string());
    if (draw && plot(sweep.dir)) std::cout << fmt::format("figures: {}\n", (sweep.dir / "plots").string());
    if (!u.failed.empty())
      spdlog::error(
          "{} of {} point(s) failed: {} (each reason in summary.json and its failed.json); "
          "--retry-failed runs them again",
          u.failed.size(), n, fmt::join(u.failed, "; "));
    if (!u.busy.empty())
      spdlog::error(
          "{} of {} point(s) were in use by another process and did not run: {}; run the sweep again once "
          "they are free",
          u.busy.size(), n, fmt::join(u.busy, "; "));
  }
  if (dist.is_main() && !u.foreign.empty())
    spdlog::error(
        "{} of {} point(s) hold a run of another config in their directory and did not run: {}; move that run "
        "away (or use another out_dir) and run the sweep again",
        u.foreign.size(), n, fmt::join(u.foreign, "; "));
}

}  // namespace

void print_sweep_plan(const Sweep& sweep, int64_t world_size, bool memory, const MeasureStep& measure) {
  print_points(sweep, world_size);
  if (sweep.ladder) print_ladder_rungs(sweep);
  if (memory) print_memory(sweep, world_size);
  if (memory && sweep.ladder) print_ladder_estimate(sweep, world_size, measure);
}

int run_sweep(const Sweep& sweep, const SweepRunOptions& opts, DistContext& dist) {
  const auto lock = lock_sweep_dir(sweep, dist);
  claim_sweep_file(sweep, opts.force, dist);
  if (dist.is_main() && !opts.watch_hint.empty())
    spdlog::info("watch it live: {}  (or --wandb PROJECT)", opts.watch_hint);
  const auto stale = stale_points(sweep, opts.force);

  Unfinished u;
  for (size_t i = 0; i < sweep.points.size(); ++i) {
    const auto& p = sweep.points[i];
    const auto tag = fmt::format("[{}/{}] {}", i + 1, sweep.points.size(), p.name);
    auto outcome = settled(p, stale[i], opts.retry_failed, tag, dist.is_main());
    if (!outcome) outcome = train_point(sweep, p, stale[i], tag, dist);
    switch (*outcome) {
      case Outcome::kFinished: break;
      case Outcome::kFailed: u.failed.push_back(p.name); break;
      case Outcome::kBusy: u.busy.push_back(p.name); break;
      case Outcome::kForeign: u.foreign.push_back(p.name); break;
      case Outcome::kInterrupted:
        if (dist.is_main()) spdlog::warn("sweep interrupted; run the same command again to continue");
        return 0;
    }
  }
  report_end(sweep, u, opts.plot, dist);
  return u.clean() ? 0 : 1;
}

}  // namespace xsagpt
