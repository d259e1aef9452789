// A point's own requeues on Slurm (see slurm_requeue.h).
#include "sweep/slurm_requeue.h"

#include "run/checkpoint.h"
#include "run/run_paths.h"
#include "sweep/point_lock.h"
#include "util/atomic_file.h"
#include "util/error.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>

namespace xsagpt {

namespace fs = std::filesystem;

namespace {

constexpr size_t kJobsKept = 8;

fs::path requeue_file(const SweepPoint& p) { return fs::path(p.config.out_dir) / "requeues.json"; }

int64_t newest_checkpoint_step(const SweepPoint& p) {
  const auto ckpts = list_checkpoints(p.config.out_dir);
  return ckpts.empty() ? -1 : checkpoint_step(ckpts.back());
}

int64_t count_in(const json& j, const char* key) {
  return j.is_object() && j.value(key, json()).is_number_integer() ? j[key].get<int64_t>() : 0;
}

std::string step_text(int64_t step) { return step < 0 ? "no checkpoint yet" : fmt::format("the newest at step {}", step); }

}  // namespace

RequeueVerdict record_requeue(const Sweep& sweep, const SweepPoint& p, const std::string& job) {
  const auto limit = sweep.slurm.value().of_rung(p.rung).requeue_limit;
  // Unreadable (cut by hand or a full disk) counts as no requeue yet.
  const auto old = read_run_file(requeue_file(p));
  const int64_t step = newest_checkpoint_step(p);
  const int64_t before = old.is_object() && old.contains("step") ? count_in(old, "step") : -1;
  // Marked before and retried since (--retry-failed removed its failure): counted afresh.
  const bool retried = old.is_object() && old.value("needs_attention", json()) == json(true) && !point_failure(p);
  const int64_t stalled = step > before ? 0 : (retried ? 0 : count_in(old, "stalled")) + 1;
  json jobs = old.is_object() && old.value("jobs", json()).is_array() ? old["jobs"] : json::array();
  jobs.push_back(job);
  while (jobs.size() > kJobsKept) jobs.erase(jobs.begin());
  const int64_t requeues = count_in(old, "requeues") + 1;
  RequeueVerdict v;
  v.requeue = stalled <= limit;
  json record = {{"requeues", requeues}, {"stalled", stalled}, {"step", step}, {"jobs", jobs},
                 {"needs_attention", !v.requeue}};
  fs::create_directories(p.config.out_dir);
  if (v.requeue) {
    write_file_atomic(requeue_file(p), record.dump(2) + "\n");
    v.message = fmt::format("point {}: requeue {} by job {} ({}; {} of slurm.requeue_limit {} in a row without a "
                            "newer checkpoint)",
                            p.name, requeues, job, step_text(step), stalled, limit);
    return v;
  }
  v.message = fmt::format(
      "needs attention: requeued itself {} time(s) in a row without a newer checkpoint ({}), past slurm.requeue_limit "
      "{}; the last by job {} (its log is in the sweep's slurm/logs); not requeued: see why it gets nowhere, then "
      "--retry-failed submits it again",
      stalled, step_text(step), limit, job);
  write_file_atomic(requeue_file(p), record.dump(2) + "\n");
  record_failure(p, v.message);
  v.message = fmt::format("point {}: {}", p.name, v.message);
  return v;
}

int requeue_point(const Sweep& sweep, size_t index) {
  if (!sweep.slurm)
    throw ConfigError("--requeue: counts a point's requeues against slurm.requeue_limit; the sweep file has no \"slurm\" "
                      "section");
  auto job = this_process().job;
  const auto v = record_requeue(sweep, sweep.points.at(index), job.empty() ? "(no Slurm job)" : job);
  if (v.requeue) spdlog::info("{}", v.message);
  else spdlog::error("{}", v.message);
  return v.requeue ? 0 : 1;
}

std::optional<std::string> requeue_summary(const SweepPoint& p) {
  const auto j = read_run_file(requeue_file(p));
  if (!j.is_object() || count_in(j, "requeues") == 0) return std::nullopt;
  return fmt::format("requeued itself {} time(s), {} in a row without a newer checkpoint", count_in(j, "requeues"),
                     count_in(j, "stalled"));
}

}  // namespace xsagpt
