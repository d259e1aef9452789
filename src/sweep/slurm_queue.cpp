// What Slurm's queue says about a sweep's points (see slurm_queue.h).
#include "sweep/slurm_queue.h"

#include "sweep/slurm_scripts.h"
#include "util/error.h"
#include "util/spawn.h"

#include <fmt/format.h>

#include <filesystem>
#include <sstream>

namespace xsagpt {

namespace {

// What a reason means for the point, for the reasons a sweep's tasks meet most.
std::string reason_gloss(const std::string& reason) {
  static const std::map<std::string, std::string> gloss{
      {"Priority", "waiting for jobs of higher priority"},
      {"Resources", "waiting for nodes to free up"},
      {"BeginTime", "requeued; waiting for its start time"},
      {"Dependency", "waiting for the jobs it depends on"},
      {"JobHeldUser", "held: `scontrol release` lets it run"},
      {"JobHeldAdmin", "held by an administrator"},
      {"JobHoldMaxRequeue", "held after too many requeues (MaxBatchRequeue): `scontrol release` lets it run"},
      {"launch failed requeued held", "its launch failed on a node and Slurm held it: check the node, then "
                                      "`scontrol release`"},
      {"JobArrayTaskLimit", "waiting for the array's other tasks (array_limit)"},
      {"QOSMaxJobsPerUserLimit", "waiting under the QOS's limit of jobs per user"},
  };
  const auto it = gloss.find(reason);
  return it == gloss.end() ? reason : fmt::format("{}: {}", reason, it->second);
}

}  // namespace

std::string QueuedTask::describe() const {
  if (reason.empty() || reason == "None") return fmt::format("job {} {}", job, state);
  return fmt::format("job {} {} ({})", job, state, reason_gloss(reason));
}

std::map<size_t, QueuedTask> parse_queued_tasks(const std::string& squeue_out) {
  std::map<size_t, QueuedTask> tasks;
  std::istringstream lines(squeue_out);
  for (std::string line; std::getline(lines, line);) {
    const auto a = line.find('|'), b = line.find('|', a + 1), c = line.find('|', b + 1);
    if (c == std::string::npos) continue;
    const auto id = line.substr(0, a);
    // Only an array's task has an id of digits: the summary job's %K is "N/A".
    if (id.empty() || id.size() > 18 || id.find_first_not_of("0123456789") != std::string::npos) continue;
    tasks[std::stoull(id)] = QueuedTask{line.substr(a + 1, b - a - 1), line.substr(b + 1, c - b - 1), line.substr(c + 1)};
  }
  return tasks;
}

std::string sweep_job_name(const Sweep& sweep) {
  return slurm_job_name(std::filesystem::absolute(sweep.dir).lexically_normal().string());
}

std::map<size_t, QueuedTask> queued_tasks(const Sweep& sweep) {
  const auto name = sweep_job_name(sweep);
  std::string out;
  const int rc =
      run_program_output({"squeue", "--noheader", "--array", "--name=" + name, "--format=%K|%i|%T|%r"}, out);
  if (rc != 0) throw ConfigError(fmt::format("squeue --name={} failed (exit {}); is Slurm reachable?", name, rc));
  return parse_queued_tasks(out);
}

}  // namespace xsagpt
