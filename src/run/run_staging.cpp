// Staging a resumed session's files and committing them once its first checkpoint
// landed (see run_staging.h).
#include "run/run_staging.h"

#include "run/metrics.h"
#include "run/metrics_history.h"
#include "run/run_paths.h"
#include "util/atomic_file.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <fstream>
#include <iterator>

namespace xsagpt {

namespace fs = std::filesystem;

namespace {

void remove_staged(const RunPaths& p) {
  for (const auto& f : p.staged()) fs::remove(f);  // the marker first
  for (const auto& f : p.staged()) fs::remove(temporary(f));
}

void rename_into_place(const fs::path& from, const fs::path& to) {
  if (!fs::exists(from)) return;
  if (::rename(from.c_str(), to.c_str()) != 0)
    throw WriteError(errno_message(to, "cannot rename the staged file into place"));
}

// Damaged lines of the history are not part of the resumed one, but are never
// dropped unseen: staged byte for byte after those of earlier resumes (committed
// into metrics.jsonl.damaged with the rest) and named with their line numbers.
// A history that stops short of the checkpoint lost its last lines before this
// resume (a file cut or emptied by hand); that is said too.
void report_metrics_cut(const RunPaths& p, const MetricsCut& cut, int64_t resume_step, int64_t log_interval) {
  const auto file = p.metrics.string();
  if (!cut.damaged_lines.empty()) {
    std::string kept;
    if (fs::exists(p.damaged_metrics)) {
      std::ifstream in(p.damaged_metrics, std::ios::binary);
      kept.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      if (in.bad()) throw WriteError(errno_message(p.damaged_metrics, "cannot read"));
    }
    write_file_atomic(p.staged_damaged, kept + cut.damaged);
    spdlog::warn(
        "{}: {} damaged line(s) (line(s) {}: cut off, or not a JSON object with a step) are left out of the "
        "resumed history and kept, byte for byte, in {}",
        file, cut.damaged_lines.size(), line_ranges(cut.damaged_lines), p.damaged_metrics.string());
  }
  const int64_t last_logged = log_interval > 0 ? resume_step / log_interval * log_interval : 0;
  if (last_logged > 0 && cut.last_step < last_logged)
    spdlog::warn(
        "{}: {}, but the checkpoint resumed is at step {} (log_interval {}): the lines after that were lost before "
        "this resume (the file was cut or emptied), and the history keeps the gap",
        file, cut.last_step < 0 ? "no line is left" : fmt::format("the last line left is of step {}", cut.last_step),
        resume_step, log_interval);
}

// run.json: the run's id, and for a branch where it branched off.
void write_run_id(const RunPaths& p, const std::string& run_id, const nlohmann::json& branched_from = nullptr) {
  nlohmann::json j{{"run_id", run_id}};
  if (!branched_from.is_null()) j["branched_from"] = branched_from;
  write_file_atomic(p.run_id, j.dump() + "\n");
}

}  // namespace

void commit_staged_run(const fs::path& dir) {
  const RunPaths p(dir);
  if (!fs::exists(p.staged_marker)) return;
  rename_into_place(p.staged_config, p.config);
  rename_into_place(p.staged_metrics, p.metrics);
  rename_into_place(p.staged_damaged, p.damaged_metrics);
  if (!fs::exists(p.run_id)) {  // a new directory, or one of an older version
    const auto marker = read_run_file(p.staged_marker);
    if (marker.is_object() && marker.value("run_id", nlohmann::json()).is_string() &&
        !marker["run_id"].get<std::string>().empty())
      write_run_id(p, marker["run_id"], marker.value("branched_from", nlohmann::json()));
  }
  fs::remove(p.done);  // a resumed run is not done until it finishes
  fsync_dir(dir);
  fs::remove(p.staged_marker);
  fsync_dir(dir);
}

void recover_staged_run(const fs::path& dir) {
  const RunPaths p(dir);
  if (!fs::exists(p.staged_marker)) {
    remove_staged(p);
    return;
  }
  const auto marker = read_run_file(p.staged_marker);  // unreadable: treated as never committed
  const int64_t from = marker.is_object() && marker.value("from_step", nlohmann::json()).is_number_integer()
                           ? marker["from_step"].get<int64_t>()
                           : -1;
  const auto all = list_checkpoints(dir);
  if (from >= 0 && !all.empty() && checkpoint_step(all.back()) > from) {
    spdlog::warn("{}: completing the previous session's commit (killed after its checkpoint at step {})", dir.string(),
                 checkpoint_step(all.back()));
    commit_staged_run(dir);
  } else {
    remove_staged(p);
  }
}

fs::path prepare_run_dir(const fs::path& dir, const RunConfig& cfg, const RunStart& start) {
  const RunPaths p(dir);
  fs::create_directories(dir);
  // Temporary files of a save that was killed.
  for (const auto& f : {p.config, p.done, p.metrics}) fs::remove(temporary(f));
  remove_staged(p);
  if (fs::is_directory(p.checkpoints))
    for (const auto& e : fs::directory_iterator(p.checkpoints))
      if (e.path().extension() == ".tmp" && checkpoint_step(e.path().stem()) >= 0) fs::remove(e.path());
  if (start.clear) {
    for (const auto& f : p.history()) fs::remove(f);
    fs::remove_all(p.checkpoints);
  }
  // Nothing of a run to keep: written in place. A branch is staged like a resume, its
  // history copied from the run it branches off.
  if (!start.checkpoint || (start.clear && start.branched_from.is_null())) {
    if (!start.run_id.empty()) write_run_id(p, start.run_id);
    write_file_atomic(p.config, to_json(cfg).dump(2) + "\n");
    return p.metrics;
  }
  if (start.rewind)  // asked for with --overwrite
    for (const auto& f : list_checkpoints(dir))
      if (checkpoint_step(f) > start.resume_step) fs::remove(f);
  try {
    // A branch's history is the run it branched off, up to the checkpoint.
    const auto history = fs::exists(p.metrics) ? std::optional(p.metrics) : start.history_from;
    if (history && fs::exists(*history)) {
      fs::copy_file(*history, p.staged_metrics, fs::copy_options::overwrite_existing);
      const auto cut = truncate_metrics(p.staged_metrics, start.resume_step);
      report_metrics_cut(p, cut, start.resume_step, cfg.train.log_interval);
    } else {
      write_file_atomic(p.staged_metrics, "");
    }
    write_file_atomic(p.staged_config, to_json(cfg).dump(2) + "\n");
    nlohmann::json marker{{"from_step", start.resume_step}, {"run_id", start.run_id}};
    if (!start.branched_from.is_null()) marker["branched_from"] = start.branched_from;
    write_file_atomic(p.staged_marker, marker.dump() + "\n");
  } catch (const fs::filesystem_error& e) {
    remove_staged(p);
    throw WriteError(fmt::format("{}: cannot stage the resumed run's metrics: {}; the run is unchanged", dir.string(),
                                 e.code().message()));
  } catch (...) {
    remove_staged(p);
    throw;
  }
  return p.staged_metrics;
}

}  // namespace xsagpt
