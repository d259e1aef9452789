// Sweeps, the end: summary files, table, figures and the points left (see sweep/results.h).
#include "sweep/results.h"

#include "sweep/ladder_report.h"
#include "sweep/report.h"
#include "sweep/status.h"
#include "sweep/summary.h"
#include "sweep/sweep_claim.h"
#include "sweep/text_table.h"
#include "util/paths.h"
#include "util/spawn.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <iostream>

namespace xsagpt {

namespace fs = std::filesystem;

namespace {

void print_results(const json& summary) {
  auto num = [](const json& p, const char* k) {
    return p.value(k, json()).is_number() ? bounded_fixed(p[k].get<double>(), 4) : std::string("-");
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

}  // namespace

// The end of a sweep that went through every point: the summary, the table, the
// figures and what did not finish.
void report_end(const Sweep& sweep, const Unfinished& u, bool draw, DistContext& dist) {
  const auto n = sweep.points.size();
  if (dist.is_main()) {
    print_results(write_summary(sweep));
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
  if (dist.is_main() && !u.waiting.empty())
    spdlog::error(
        "{} of {} point(s) are branches that did not start, their checkpoint missing (--status says what each "
        "waits for): {}; run the sweep again once their sources have reached it",
        u.waiting.size(), n, fmt::join(u.waiting, "; "));
  if (dist.is_main() && !u.foreign.empty())
    spdlog::error(
        "{} of {} point(s) hold a run of another config in their directory and did not run: {}; move that run "
        "away (or use another out_dir) and run the sweep again",
        u.foreign.size(), n, fmt::join(u.foreign, "; "));
}


int summarize_sweep(const Sweep& sweep, bool draw) {
  // Another sweep file would find none of the directory's points its own, and rewrite a
  // finished sweep's summary and report with every point invalid.
  check_sweep_file(sweep);
  const auto summary = write_summary(sweep);
  print_results(summary);
  std::cout << fmt::format("summary: {}\n", (sweep.dir / "summary.json").string());
  if (draw && plot(sweep.dir)) std::cout << fmt::format("figures: {}\n", (sweep.dir / "plots").string());
  // Every point left out, with why: its state as the summary read it (sweep/status.h's
  // point_state, as --status tells it), not read again.
  std::vector<std::string> left;
  for (const auto& p : summary["points"]) {
    if (p["status"] == "done") continue;
    const auto& why = p.contains("error") ? p["error"] : p.value("detail", json(""));
    left.push_back(fmt::format("{} ({}: {})", p["name"].get<std::string>(), p["status"].get<std::string>(),
                               why.is_string() ? why.get<std::string>() : why.dump()));
  }
  for (const auto& p : sweep.waiting) left.push_back(p.name + " (waiting for its tuned rate)");
  if (left.empty()) return 0;
  spdlog::error("{} of {} point(s) are not done and are left out of the summary: {}", left.size(),
                sweep.points.size() + sweep.waiting.size(), fmt::join(left, "; "));
  return 1;
}

}  // namespace xsagpt
