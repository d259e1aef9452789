// `xsagpt sweep --slurm [--submit]` (see slurm_submit.h).
#include "sweep/slurm_submit.h"

#include "sweep/branch.h"
#include "sweep/point_lock.h"
#include "sweep/slurm_plan.h"
#include "sweep/slurm_queue.h"
#include "sweep/slurm_scripts.h"
#include "sweep/status.h"
#include "util/atomic_file.h"
#include "util/spawn.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <optional>

namespace xsagpt {

namespace fs = std::filesystem;

namespace {

// sbatch --parsable prints "<id>" or "<id>;<cluster>".
std::string sbatch_job(const std::vector<std::string>& argv) {
  std::string out;
  const int rc = run_program_output(argv, out);
  const auto id = out.substr(0, out.find_first_of(";\n"));
  if (rc != 0 || id.empty() || id.find_first_not_of("0123456789") != std::string::npos) {
    std::string cmd;
    for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + shell_quote(a);
    throw ConfigError(fmt::format("--submit: {} failed (exit {}){}", cmd, rc, out.empty() ? "" : ": " + out));
  }
  return id;
}

// Cancels the array jobs `ids` that a refused submission had queued. Throws the refusal
// when nothing of the sweep stays queued; otherwise says which jobs are left and returns 1.
int withdraw(const std::vector<std::string>& ids, const std::string& refusal) {
  std::vector<std::string> argv{"scancel"};
  argv.insert(argv.end(), ids.begin(), ids.end());
  std::string list;
  for (const auto& id : ids) list += (list.empty() ? "" : " ") + id;
  const int rc = run_program(argv, true);
  if (rc == 0)
    throw ConfigError(fmt::format("{}; cancelled the {} array job(s) submitted before it ({}), so nothing of this "
                                  "sweep is queued: the same command submits it again once the refusal is fixed",
                                  refusal, ids.size(), list));
  spdlog::error("{}; the {} array job(s) submitted before it ({}) could not be cancelled (scancel exit {}) and stay "
                "queued with no summary job after them: cancel them with `scancel {}`, or run --summarize once they "
                "have ended",
                refusal, ids.size(), list, rc, list);
  return 1;
}

// The batch scripts' context: this binary, the sweep file, the working and log folders,
// each value checked to be one a script can carry before anything is written.
SlurmScriptContext script_context(const Sweep& sweep, const std::string& sweep_file, const SlurmRunOptions& opts,
                                  const std::vector<SlurmArray>& arrays) {
  SlurmScriptContext ctx;
  ctx.binary = fs::canonical("/proc/self/exe").string();
  ctx.sweep_file = fs::absolute(sweep_file).lexically_normal().string();
  ctx.workdir = fs::current_path().string();
  ctx.log_dir = (fs::absolute(sweep.dir).lexically_normal() / "slurm" / "logs").string();
  ctx.job_name = sweep_job_name(sweep);
  ctx.retry_failed = opts.retry_failed;
  ctx.plot = opts.plot;
  std::vector<std::string> labels;
  for (const auto& a : arrays) labels.push_back(a.label);
  check_slurm_script_values(ctx, labels);
  return ctx;
}

// Which points to submit: neither done nor queued, nor held by a live process, nor failed
// (unless retried), nor invalid, nor a branch whose source is neither done nor going now.
// Prints why each one left out is, and the counts; empty when there is nothing to submit.
std::vector<bool> points_to_submit(const Sweep& sweep, const std::map<size_t, QueuedTask>& queued, bool retry_failed) {
  const auto timing = point_lock_timing();
  const auto clock = sweep_lock_clock(sweep);
  std::map<std::string, size_t> counts;
  std::vector<bool> wanted(sweep.points.size(), false);
  for (size_t i = 0; i < sweep.points.size(); ++i) {
    const auto& p = sweep.points[i];
    const auto st = point_state(sweep, p, timing, clock);
    std::string why = st.name();
    if (queued.contains(i)) why = "queued";
    else if (st.status == PointStatus::kFailed && retry_failed) why = "pending";
    // A branch whose checkpoint is missing goes only after its source's task, submitted now
    // or queued before (a source comes before its branches in the order).
    if (why == "pending" && p.branch_of && !branch_ready(sweep, p) && !wanted[*p.branch_of] &&
        !queued.contains(*p.branch_of)) {
      why = "waiting";
      std::cout << fmt::format("  {} {}: not submitted: it {}\n", i, p.name, st.detail);
    }
    if (why == "invalid") std::cout << fmt::format("  {} {}: invalid, not submitted: {}\n", i, p.name, st.detail);
    counts[why] += 1;
    wanted[i] = why == "pending";
  }
  std::cout << fmt::format(
      "{} point(s): {} done, {} queued, {} running, {} failed{}, {} invalid{}; {} to submit\n", sweep.points.size(),
      counts["done"], counts["queued"], counts["running"], counts["failed"],
      counts["failed"] ? " (--retry-failed submits them again)" : "", counts["invalid"],
      counts["waiting"] ? fmt::format(", {} branch(es) waiting for a source neither done nor queued", counts["waiting"])
                        : "",
      counts["pending"]);
  if (counts["pending"] == 0) return {};
  return wanted;
}

// One array's script, with the point whose task its branches wait for.
struct Script {
  fs::path file;
  std::string what;
  std::optional<size_t> after;  // a branch array whose tasks wait for this point's task
};

struct Scripts {
  std::vector<Script> arrays;
  std::map<size_t, size_t> script_of;  // a point submitted now -> its script
  fs::path summary;
};

// The array scripts of the wanted points and the summary job's, written under OUT/slurm/
// in place of another plan's.
Scripts write_scripts(const Sweep& sweep, const std::vector<SlurmArray>& arrays, const std::vector<bool>& wanted,
                      const SlurmScriptContext& ctx) {
  const auto slurm_dir = fs::absolute(sweep.dir).lexically_normal() / "slurm";
  fs::create_directories(slurm_dir / "logs");
  for (const auto& f : fs::directory_iterator(slurm_dir))
    if (f.path().filename().string().starts_with("array-")) fs::remove(f.path());  // another plan's
  Scripts out;
  for (size_t k = 0; k < arrays.size(); ++k) {
    std::vector<size_t> tasks;
    bool wait = false;
    for (const auto i : arrays[k].points)
      if (wanted[i]) tasks.push_back(i), wait |= !branch_ready(sweep, sweep.points[i]);
    if (tasks.empty()) continue;
    for (const auto i : tasks) out.script_of[i] = out.arrays.size();
    const auto file = slurm_dir / fmt::format("array-{}.sh", k);
    write_file_atomic(file, slurm_array_script(arrays[k].settings, tasks, arrays[k].label, ctx));
    out.arrays.push_back({file, fmt::format("{}: point(s) {}", arrays[k].label, slurm_task_list(tasks)),
                          wait ? arrays[k].after : std::nullopt});
  }
  out.summary = slurm_dir / "summary.sh";
  write_file_atomic(out.summary, slurm_summary_script(sweep.slurm->base, ctx));
  return out;
}

// A branch array's dependency: its source's task, by its job id or (`job` printing the
// shell variable of) the script that submits it. afterany: a source that failed ends
// too, and its branches, finding no checkpoint, say so (a requeued task has not ended).
std::vector<std::string> dependency(const Script& s, const Scripts& scripts, const std::map<size_t, QueuedTask>& queued,
                                    const std::function<std::string(size_t)>& job) {
  if (!s.after) return {};
  const auto it = queued.find(*s.after);
  return {"--dependency=afterany:" + (it != queued.end() ? it->second.job
                                                         : fmt::format("{}_{}", job(scripts.script_of.at(*s.after)),
                                                                       *s.after))};
}

void print_commands(const Scripts& scripts, const std::map<size_t, QueuedTask>& queued, const std::string& sweep_file) {
  std::cout << fmt::format("wrote {} array script(s) and summary.sh in {}; submit them with:\n",
                           scripts.arrays.size(), scripts.summary.parent_path().string());
  std::string deps;
  for (size_t k = 0; k < scripts.arrays.size(); ++k) {
    const auto dep =
        dependency(scripts.arrays[k], scripts, queued, [](size_t n) { return fmt::format("${{job{}%%;*}}", n); });
    std::cout << fmt::format("  job{}=$(sbatch --parsable{} {})   # {}\n", k, dep.empty() ? "" : " " + dep.front(),
                             shell_quote(scripts.arrays[k].file.string()), scripts.arrays[k].what);
    deps += fmt::format(":${{job{}%%;*}}", k);
  }
  std::cout << fmt::format("  sbatch --dependency=afterany{} {}\nor: xsagpt sweep -c {} --slurm --submit\n", deps,
                           shell_quote(scripts.summary.string()), shell_quote(sweep_file));
}

// All or nothing: a later sbatch that refuses (a partition, a node count, a limit of the
// cluster's) would leave the arrays before it queued with no summary job after them, so
// they are cancelled, and the refusal stands for the whole submission.
int submit_all(const Scripts& scripts, const std::map<size_t, QueuedTask>& queued, const std::string& sweep_file) {
  std::vector<std::string> ids;
  try {
    for (const auto& script : scripts.arrays) {
      std::vector<std::string> argv{"sbatch", "--parsable"};
      for (auto& d : dependency(script, scripts, queued, [&](size_t n) { return ids.at(n); })) argv.push_back(d);
      argv.push_back(script.file.string());
      ids.push_back(sbatch_job(argv));
      std::cout << fmt::format("submitted array job {} ({}): {}{}\n", ids.back(), script.file.filename().string(),
                               script.what, argv.size() > 3 ? " (" + argv[2] + ")" : "");
    }
    std::string deps;
    for (const auto& id : ids) deps += ":" + id;
    const auto id = sbatch_job({"sbatch", "--parsable", "--dependency=afterany" + deps, scripts.summary.string()});
    std::cout << fmt::format("submitted summary job {} (after the arrays end, whatever their outcome); watch with: "
                             "xsagpt sweep -c {} --status\n",
                             id, shell_quote(sweep_file));
  } catch (const ConfigError& e) {
    std::cout.flush();
    if (ids.empty()) throw;
    return withdraw(ids, e.what());
  }
  return 0;
}

}  // namespace

int run_slurm(const Sweep& sweep, const std::string& sweep_file, const SlurmRunOptions& opts,
              const MeasureStep& measure) {
  if (!sweep.slurm)
    throw ConfigError(fmt::format("--slurm: {} has no \"slurm\" section (its keys: docs/cluster.md)", sweep_file));
  if (opts.submit)
    for (const auto* tool : {"sbatch", "squeue", "scancel"})
      if (find_on_path(tool).empty())
        throw ConfigError(fmt::format("--submit: no {} on the PATH: run it where Slurm's commands are, or without "
                                      "--submit to write the scripts alone",
                                      tool));
  if (!sweep.waiting.empty())
    spdlog::warn(
        "--slurm: {} point(s) of the larger rungs wait for their variant's rate from the tuning rungs "
        "(ladder.tune_rungs) and are not written; run --slurm again once those are done",
        sweep.waiting.size());
  const auto arrays = slurm_arrays(sweep);
  std::optional<LadderTimes> times;
  if (sweep.ladder) times = ladder_times(sweep, 1, measure);
  check_slurm_arrays(sweep, sweep_file, arrays, times ? &*times : nullptr);
  const auto ctx = script_context(sweep, sweep_file, opts, arrays);

  const auto queued = opts.submit ? queued_tasks(sweep) : std::map<size_t, QueuedTask>{};
  const auto wanted = points_to_submit(sweep, queued, opts.retry_failed);
  if (wanted.empty()) {
    std::cout << "nothing to submit: every point is done, queued, running, failed or invalid (see --status)\n";
    return 0;
  }
  const auto scripts = write_scripts(sweep, arrays, wanted, ctx);
  if (!opts.submit) {
    print_commands(scripts, queued, sweep_file);
    return 0;
  }
  return submit_all(scripts, queued, sweep_file);
}

}  // namespace xsagpt
