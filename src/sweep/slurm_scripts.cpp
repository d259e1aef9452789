// The batch scripts of a sweep on Slurm (see slurm_scripts.h).
#include "sweep/slurm_scripts.h"

#include "util/error.h"
#include "util/spawn.h"
#include "util/utf8.h"

#include <fmt/format.h>

#include <filesystem>

namespace xsagpt {

namespace {

// A path as an #SBATCH line's value: in double quotes, which sbatch's parser removes, with
// its own double quotes escaped (check_slurm_script_values has refused backslashes and
// control characters).
std::string sbatch_quoted(const std::string& value) {
  std::string out = "\"";
  for (const char c : value) out += c == '"' ? std::string("\\\"") : std::string(1, c);
  return out + "\"";
}

// A folder in --output, whose '%' sbatch would read as the start of a pattern (%j, %x).
std::string output_pattern(const std::string& dir, const std::string& file_pattern) {
  std::string out;
  for (const char c : dir) out += c == '%' ? std::string("%%") : std::string(1, c);
  return sbatch_quoted(out + "/" + file_pattern);
}

void check_script_value(const std::string& what, const std::string& value) {
  for (const unsigned char c : value) {
    if (c >= 0x20 && c != 0x7f && c != '\\') continue;
    const char* why = c == '\\'                  ? "sbatch would stop reading its file name patterns"
                      : c == '\n' || c == '\r' ? "a newline would end a line of the script and run the rest as a command"
                                               : "sbatch and bash would each read it their own way";
    throw ConfigError(fmt::format("--slurm: {} {} holds {}, which a batch script cannot carry ({}); choose one without it",
                                  what, json(utf8::escape_invalid(value)).dump(),
                                  c == '\\' ? "a backslash" : "a control character", why));
  }
}

// The lines every job of the sweep gets: where it runs, what it is billed to.
std::string common_lines(const SlurmSettings& s, const SlurmScriptContext& ctx) {
  std::string out = fmt::format("#SBATCH --chdir={}\n", sbatch_quoted(ctx.workdir));
  if (!s.partition.empty()) out += fmt::format("#SBATCH --partition={}\n", s.partition);
  if (!s.account.empty()) out += fmt::format("#SBATCH --account={}\n", s.account);
  if (!s.qos.empty()) out += fmt::format("#SBATCH --qos={}\n", s.qos);
  return out;
}

std::string array_spec(const std::vector<size_t>& tasks, int64_t limit) {
  const auto list = slurm_task_list(tasks);
  return limit > 0 ? fmt::format("{}%{}", list, limit) : list;
}

}  // namespace

void check_slurm_script_values(const SlurmScriptContext& ctx, const std::vector<std::string>& labels) {
  check_script_value("the xsagpt binary's path", ctx.binary);
  check_script_value("the sweep file's path", ctx.sweep_file);
  check_script_value("the working directory", ctx.workdir);
  check_script_value("out_dir's log folder", ctx.log_dir);
  for (const auto& l : labels) check_script_value("the array's label", l);
}

std::string slurm_task_list(const std::vector<size_t>& tasks) {
  std::string out;
  for (const auto t : tasks) out += (out.empty() ? "" : ",") + std::to_string(t);
  return out;
}

std::string slurm_job_name(const std::string& dir) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a: the same name from every build and host
  for (unsigned char c : dir) h = (h ^ c) * 1099511628211ULL;
  std::string last = std::filesystem::path(dir).filename().string();
  if (last.empty()) last = "sweep";
  for (auto& c : last)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  return fmt::format("xsagpt-{}-{:08x}", last.substr(0, 40), static_cast<uint32_t>(h ^ (h >> 32)));
}

std::string slurm_array_script(const SlurmSettings& s, const std::vector<size_t>& tasks, const std::string& label,
                               const SlurmScriptContext& ctx) {
  std::string out = fmt::format(
      "#!/bin/bash\n"
      "# xsagpt sweep {}: the points of {}, one array task per point (its task id is the point's\n"
      "# index in --dry-run's order). Written by `xsagpt sweep --slurm`; submitted again by it, only\n"
      "# the points that are neither done nor queued are.\n"
      "#SBATCH --job-name={}\n#SBATCH --array={}\n#SBATCH --nodes={}\n#SBATCH --ntasks-per-node={}\n"
      "#SBATCH --cpus-per-task={}\n",
      ctx.sweep_file, label, ctx.job_name, array_spec(tasks, s.array_limit), s.nodes, s.ntasks_per_node,
      s.cpus_per_task);
  if (s.gpus_per_node > 0) out += fmt::format("#SBATCH --gpus-per-node={}\n", s.gpus_per_node);
  out += fmt::format(
      "#SBATCH --time={}\n#SBATCH --signal=USR2@{}\n#SBATCH --requeue\n#SBATCH --open-mode=append\n"
      "#SBATCH --output={}\n",
      s.time, s.signal_s, output_pattern(ctx.log_dir, "%x-%A_%a.out"));
  out += common_lines(s, ctx);
  for (const auto& e : s.extra) out += "#SBATCH " + e + "\n";
  out += fmt::format(
      "\n"
      "# A signal that reaches this shell (a preemption's SIGTERM reaches every process) must not end it\n"
      "# before srun returns: the trap runs once srun has, and the point's exit status decides.\n"
      "trap 'echo \"xsagpt: the batch shell got a signal; srun passes it to the point\"' TERM USR2\n"
      "srun --kill-on-bad-exit=1 {0} sweep -c {1} --point-from-env SLURM_ARRAY_TASK_ID{2}\n"
      "rc=$?\n"
      "# 3: interrupted and resumable (the signal before the time limit): this task, and only it, goes\n"
      "# back to the queue and resumes from its checkpoint. 129, 130, 140, 143 (128 + HUP, INT, USR2,\n"
      "# TERM): a stop signal ended it before it could catch one (while the program loaded) or a second\n"
      "# signal did; nothing it finished is lost, and it resumes the same way. A job that\n"
      "# Slurm itself ended (scancel, a preemption that cancels, the limit passed) is no longer\n"
      "# RUNNING and is left ended: a cancel stays a cancel (Slurm would requeue even a cancelled\n"
      "# job), and `xsagpt sweep --slurm --submit` submits its point again.\n"
      "case \"$rc\" in\n"
      "  3|129|130|140|143)\n"
      "    state=$(scontrol show job \"$SLURM_JOB_ID\" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | head -n 1)\n"
      "    if [ \"$state\" != JobState=RUNNING ]; then\n"
      "      echo \"xsagpt: point ${{SLURM_ARRAY_TASK_ID}} ended by Slurm (${{state:-JobState unknown}}, exit $rc); "
      "not requeued here (a cancel stays a cancel, a requeue by hand stands)\"\n"
      "      exit \"$rc\"\n"
      "    fi\n"
      "    # The point counts its requeues: past slurm.requeue_limit in a row without a newer\n"
      "    # checkpoint it says it needs attention, and the task ends instead of looping.\n"
      "    if {0} sweep -c {1} --point-from-env SLURM_ARRAY_TASK_ID --requeue; then\n"
      "      echo \"xsagpt: point ${{SLURM_ARRAY_TASK_ID}} interrupted (exit $rc); requeueing "
      "${{SLURM_ARRAY_JOB_ID}}_${{SLURM_ARRAY_TASK_ID}}\"\n"
      "      scontrol requeue \"${{SLURM_ARRAY_JOB_ID}}_${{SLURM_ARRAY_TASK_ID}}\" && exit 0\n"
      "    fi\n"
      "    ;;\n"
      "esac\n"
      "exit \"$rc\"\n",
      shell_quote(ctx.binary), shell_quote(ctx.sweep_file), ctx.retry_failed ? " --retry-failed" : "");
  return out;
}

std::string slurm_summary_script(const SlurmSettings& base, const SlurmScriptContext& ctx) {
  std::string out = fmt::format(
      "#!/bin/bash\n"
      "# xsagpt sweep {}: the summary, once the arrays it depends on have ended (afterany), whatever\n"
      "# failed; its report names every point that is not done, with why.\n"
      "#SBATCH --job-name={}-summary\n#SBATCH --nodes=1\n#SBATCH --ntasks=1\n#SBATCH --cpus-per-task=1\n"
      "#SBATCH --time={}\n#SBATCH --open-mode=append\n#SBATCH --output={}\n",
      ctx.sweep_file, ctx.job_name, base.time, output_pattern(ctx.log_dir, "%x-%j.out"));
  out += common_lines(base, ctx);
  out += fmt::format("\n{} sweep -c {} --summarize{}\n", shell_quote(ctx.binary), shell_quote(ctx.sweep_file),
                     ctx.plot ? "" : " --no-plot");
  return out;
}

}  // namespace xsagpt
