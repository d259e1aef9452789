// Run directory life cycle (see run_dir.h): deciding how a run starts without
// writing anything, then preparing and finishing the directory.
#include "train/run_dir.h"

#include "train/metrics.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <fstream>
#include <iterator>
#include <random>

namespace xsagpt {

namespace fs = std::filesystem;

namespace {

bool holds_run(const fs::path& dir) {
  return fs::exists(dir / "config.json") || fs::exists(dir / "metrics.jsonl") || fs::exists(dir / "done.json") ||
         !list_checkpoints(dir).empty();
}

// What the directory holds, for messages: "checkpoints up to step 40, finished".
std::string describe_run(const fs::path& dir) {
  std::vector<std::string> parts;
  const auto all = list_checkpoints(dir);
  parts.push_back(all.empty() ? "no checkpoint"
                              : fmt::format("checkpoints up to step {}", checkpoint_step(all.back())));
  if (fs::exists(dir / "metrics.jsonl")) parts.push_back("metrics.jsonl");
  if (fs::exists(dir / "done.json")) parts.push_back("finished");
  return fmt::format("{}", fmt::join(parts, ", "));
}

bool same_dir(fs::path a, fs::path b) {
  if (a.empty()) a = ".";
  if (b.empty()) b = ".";
  std::error_code ea, eb;
  const auto ca = fs::weakly_canonical(a, ea), cb = fs::weakly_canonical(b, eb);
  return !ea && !eb && ca == cb;
}

// The run a checkpoint file came from: the folder holding its checkpoints/, or the
// out_dir saved in it.
std::string run_of(const fs::path& file, const json& config) {
  if (file.parent_path().filename() == "checkpoints") {
    const auto run = file.parent_path().parent_path();
    return run.empty() ? "." : run.string();
  }
  std::error_code ec;
  const auto parent = fs::weakly_canonical(file, ec).parent_path();
  if (!ec && parent.filename() == "checkpoints") return parent.parent_path().string();
  if (config.is_object() && config.contains("out_dir") && config["out_dir"].is_string())
    return config["out_dir"].get<std::string>();
  return "another run";
}

double number_or_nan(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : NAN;
}

std::string loss_text(double x) { return std::isfinite(x) ? fmt::format("{:.4f}", x) : "unknown"; }

}  // namespace

std::string recorded_run_id(const fs::path& dir) {
  if (!fs::exists(dir / "run.json")) return "";
  try {
    const auto j = read_json_file(dir / "run.json");
    if (j.is_object() && j.value("run_id", json()).is_string()) return j["run_id"].get<std::string>();
  } catch (const ConfigError&) {  // unreadable: treated as unknown
  }
  return "";
}

namespace {

// 128 random bits from the kernel, as hex: unique across runs, hosts and restarts.
std::string new_run_id() {
  std::random_device rd;
  std::string id;
  for (int i = 0; i < 4; ++i) id += fmt::format("{:08x}", static_cast<uint32_t>(rd()));
  return id;
}

}  // namespace

json RunSummary::to_json() const {
  auto num = [](double x) { return std::isfinite(x) ? json(x) : json(nullptr); };
  return {{"step", step},
          {"tokens", tokens},
          {"final_train_loss", num(final_train_loss)},
          {"final_val_loss", num(final_val_loss)},
          {"wall_s", wall_s}};
}

RunSummary RunSummary::from_json(const json& j) {
  RunSummary s;
  if (!j.is_object()) return s;
  const auto step = j.value("step", json()), tokens = j.value("tokens", json());
  s.step = step.is_number_integer() ? step.get<int64_t>() : 0;
  s.tokens = tokens.is_number_integer() ? tokens.get<int64_t>() : 0;
  s.final_train_loss = number_or_nan(j, "final_train_loss");
  s.final_val_loss = number_or_nan(j, "final_val_loss");
  s.wall_s = number_or_nan(j, "wall_s");
  return s;
}

RunOpening open_run(const RunConfig& cfg, const std::string& resume, bool overwrite, int64_t world_size) {
  const fs::path dir = cfg.out_dir;
  RunOpening run;
  RunStart& s = run.start;
  if (resume == "auto" && overwrite)
    throw ConfigError(
        "--resume auto and --overwrite: choose one (--overwrite with --resume PATH continues from "
        "that checkpoint after discarding what the run directory holds)");
  const bool holds = holds_run(dir);
  if (resume.empty()) {
    if (holds && !overwrite)
      throw ConfigError(
          fmt::format("out_dir {} already holds a run ({}): pass --resume auto to continue it, "
                      "--overwrite to start over, or choose another --out",
                      dir.string(), describe_run(dir)));
    s.clear = holds;
    s.run_id = new_run_id();
    return run;
  }
  if (resume == "auto") {
    const auto all = list_checkpoints(dir);
    if (all.empty()) {
      if (holds) {
        spdlog::warn("{}: no checkpoint to resume; starting the run from the beginning", dir.string());
        s.clear = true;
      }
      s.run_id = new_run_id();
      return run;
    }
    s.checkpoint = all.back();
  } else {
    s.checkpoint = fs::path(resume);
  }

  const std::string file = s.checkpoint->string();
  auto& ck = run.checkpoint.emplace(load_checkpoint(*s.checkpoint));
  check_resume_compatible(cfg, ck.config, file);
  if (static_cast<int64_t>(ck.loader.size()) != world_size)
    throw ConfigError(
        fmt::format("{}: saved by {} rank(s) but this run has world size {}; resume with the same number of processes",
                    file, ck.loader.size(), world_size));
  s.resume_step = ck.step;
  if (const auto named = checkpoint_step(*s.checkpoint); named >= 0 && named != ck.step)
    throw CheckpointError(
        fmt::format("{}: its name says step {} but it holds step {} (renamed or copied over "
                    "another?); resume from it by a name that matches",
                    file, named, ck.step));

  // Whose run is it? Only the directory's own checkpoints continue the run it holds:
  // those in out_dir/checkpoints (also by a symbolic link) that carry its run id.
  std::error_code ec;
  const auto real = fs::weakly_canonical(*s.checkpoint, ec);
  const bool own = same_dir(s.checkpoint->parent_path(), dir / "checkpoints") ||
                   (!ec && same_dir(real.parent_path(), dir / "checkpoints"));
  const auto dir_id = recorded_run_id(dir);
  if (own && !dir_id.empty() && !ck.run_id.empty() && ck.run_id != dir_id)
    throw CheckpointError(fmt::format(
        "{} lies in {}/checkpoints but belongs to another run (its run id {}, the directory's {} in run.json): "
        "copied in from elsewhere? Move it out, or resume it into its own --out",
        file, dir.string(), ck.run_id, dir_id));
  s.run_id = !ck.run_id.empty() ? ck.run_id : !dir_id.empty() && own ? dir_id : new_run_id();
  if (!own && holds) {
    if (!overwrite)
      throw ConfigError(fmt::format(
          "out_dir {} already holds another run ({}), and {} is a checkpoint of {}: continuing it there would mix the "
          "two runs. Resume into a new --out, or add --overwrite to discard the run in {} and continue from the "
          "checkpoint there",
          dir.string(), describe_run(dir), file, run_of(*s.checkpoint, ck.config), dir.string()));
    s.clear = true;
  }
  std::vector<int64_t> later;  // the run's own checkpoints past the one resumed
  if (own)
    for (const auto& f : list_checkpoints(dir))
      if (checkpoint_step(f) > ck.step) later.push_back(checkpoint_step(f));

  if (ck.step >= cfg.train.max_steps) {
    RunSummary done{ck.step, ck.tokens, ck.train_loss, ck.val_loss, ck.elapsed_s};
    if (own && later.empty()) {
      if (!std::isfinite(done.final_train_loss) || !std::isfinite(done.final_val_loss)) {
        const auto logged = losses_at_step(dir / "metrics.jsonl", ck.step);  // checkpoints of older versions
        if (!std::isfinite(done.final_train_loss) && logged.train_loss) done.final_train_loss = *logged.train_loss;
        if (!std::isfinite(done.final_val_loss) && logged.val_loss) done.final_val_loss = *logged.val_loss;
      }
      run.record_done = true;
      if (fs::exists(dir / "done.json")) {
        json existing;
        try {
          existing = read_json_file(dir / "done.json");
        } catch (const ConfigError&) {  // unreadable: rewritten
        }
        const auto recorded = RunSummary::from_json(existing);
        if (recorded.step == ck.step && std::isfinite(recorded.final_train_loss) &&
            std::isfinite(recorded.final_val_loss)) {
          done = recorded;
          run.record_done = false;
        }
      }
    }
    run.finished = done;
    return run;
  }
  if (!later.empty()) {
    if (!overwrite)
      throw ConfigError(fmt::format(
          "{} is step {} of the run in {}, which has checkpoints up to step {}: continuing from it would mix two "
          "histories. Use --resume auto for the newest, resume into a new --out, or add --overwrite to discard the "
          "run's checkpoints and metrics past step {}",
          file, ck.step, dir.string(), later.back(), ck.step));
    s.rewind = true;
  }
  return run;
}

void close_finished_run(const RunConfig& cfg, const RunOpening& run) {
  const auto& d = *run.finished;
  spdlog::info(
      "{}: already finished at step {} (train.max_steps = {}): train loss {}, val loss {}; raise "
      "train.max_steps to continue it",
      cfg.out_dir, d.step, cfg.train.max_steps, loss_text(d.final_train_loss), loss_text(d.final_val_loss));
  if (run.record_done) {
    finish_run(cfg.out_dir, d);
    spdlog::info("wrote {}", (fs::path(cfg.out_dir) / "done.json").string());
  }
}

namespace {

constexpr const char* kStagedMarker = "staged.json";
constexpr const char* kStagedConfig = "config.json.staged";
constexpr const char* kStagedMetrics = "metrics.jsonl.staged";
constexpr const char* kDamagedMetrics = "metrics.jsonl.damaged";
constexpr const char* kStagedDamaged = "metrics.jsonl.damaged.staged";

void remove_staged(const fs::path& dir) {
  fs::remove(dir / kStagedMarker);  // first: without it the staged files are only leftovers
  for (const char* name : {kStagedConfig, kStagedMetrics, kStagedDamaged}) fs::remove(dir / name);
  for (const char* name :
       {"staged.json.tmp", "config.json.staged.tmp", "metrics.jsonl.staged.tmp", "metrics.jsonl.damaged.staged.tmp"})
    fs::remove(dir / name);
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
void report_metrics_cut(const fs::path& dir, const MetricsCut& cut, int64_t resume_step, int64_t log_interval) {
  const auto file = (dir / "metrics.jsonl").string();
  if (!cut.damaged_lines.empty()) {
    std::string kept;
    if (fs::exists(dir / kDamagedMetrics)) {
      std::ifstream in(dir / kDamagedMetrics, std::ios::binary);
      kept.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      if (in.bad()) throw WriteError(errno_message(dir / kDamagedMetrics, "cannot read"));
    }
    write_file_atomic(dir / kStagedDamaged, kept + cut.damaged);
    spdlog::warn(
        "{}: {} damaged line(s) (line(s) {}: cut off, or not a JSON object with a step) are left out of the "
        "resumed history and kept, byte for byte, in {}",
        file, cut.damaged_lines.size(), line_ranges(cut.damaged_lines), (dir / kDamagedMetrics).string());
  }
  const int64_t last_logged = log_interval > 0 ? resume_step / log_interval * log_interval : 0;
  if (last_logged > 0 && cut.last_step < last_logged)
    spdlog::warn(
        "{}: {}, but the checkpoint resumed is at step {} (log_interval {}): the lines after that were lost before "
        "this resume (the file was cut or emptied), and the history keeps the gap",
        file, cut.last_step < 0 ? "no line is left" : fmt::format("the last line left is of step {}", cut.last_step),
        resume_step, log_interval);
}

}  // namespace

void commit_staged_run(const fs::path& dir) {
  if (!fs::exists(dir / kStagedMarker)) return;
  rename_into_place(dir / kStagedConfig, dir / "config.json");
  rename_into_place(dir / kStagedMetrics, dir / "metrics.jsonl");
  rename_into_place(dir / kStagedDamaged, dir / kDamagedMetrics);
  if (!fs::exists(dir / "run.json")) {  // a new directory, or one of an older version
    json marker;
    try {
      marker = read_json_file(dir / kStagedMarker);
    } catch (const ConfigError&) {}
    if (marker.is_object() && marker.value("run_id", json()).is_string() &&
        !marker["run_id"].get<std::string>().empty())
      write_file_atomic(dir / "run.json", json{{"run_id", marker["run_id"]}}.dump() + "\n");
  }
  fs::remove(dir / "done.json");  // a resumed run is not done until it finishes
  fsync_dir(dir);
  fs::remove(dir / kStagedMarker);
  fsync_dir(dir);
}

void recover_staged_run(const fs::path& dir) {
  if (!fs::exists(dir / kStagedMarker)) {
    remove_staged(dir);
    return;
  }
  int64_t from = -1;
  try {
    const auto marker = read_json_file(dir / kStagedMarker);
    if (marker.is_object() && marker.value("from_step", json()).is_number_integer())
      from = marker["from_step"].get<int64_t>();
  } catch (const ConfigError&) {  // unreadable: treated as never committed
  }
  const auto all = list_checkpoints(dir);
  if (from >= 0 && !all.empty() && checkpoint_step(all.back()) > from) {
    spdlog::warn("{}: completing the previous session's commit (killed after its checkpoint at step {})", dir.string(),
                 checkpoint_step(all.back()));
    commit_staged_run(dir);
  } else {
    remove_staged(dir);
  }
}

fs::path prepare_run_dir(const fs::path& dir, const RunConfig& cfg, const RunStart& start) {
  fs::create_directories(dir);
  // Temporary files of a save that was killed (atomic writes go through <name>.tmp).
  for (const char* name : {"config.json.tmp", "done.json.tmp", "metrics.jsonl.tmp"}) fs::remove(dir / name);
  remove_staged(dir);
  if (fs::is_directory(dir / "checkpoints"))
    for (const auto& e : fs::directory_iterator(dir / "checkpoints"))
      if (e.path().extension() == ".tmp" && checkpoint_step(e.path().stem()) >= 0) fs::remove(e.path());
  if (start.clear) {
    for (const char* name : {"metrics.jsonl", kDamagedMetrics, "done.json", "config.json", "run.json"})
      fs::remove(dir / name);
    fs::remove_all(dir / "checkpoints");
  }
  if (!start.checkpoint || start.clear) {  // nothing of a run to keep: written in place
    if (!start.run_id.empty()) write_file_atomic(dir / "run.json", json{{"run_id", start.run_id}}.dump() + "\n");
    write_file_atomic(dir / "config.json", to_json(cfg).dump(2) + "\n");
    return dir / "metrics.jsonl";
  }
  if (start.rewind)  // asked for with --overwrite
    for (const auto& f : list_checkpoints(dir))
      if (checkpoint_step(f) > start.resume_step) fs::remove(f);
  try {
    if (fs::exists(dir / "metrics.jsonl")) {
      fs::copy_file(dir / "metrics.jsonl", dir / kStagedMetrics, fs::copy_options::overwrite_existing);
      const auto cut = truncate_metrics(dir / kStagedMetrics, start.resume_step);
      report_metrics_cut(dir, cut, start.resume_step, cfg.train.log_interval);
    } else {
      write_file_atomic(dir / kStagedMetrics, "");
    }
    write_file_atomic(dir / kStagedConfig, to_json(cfg).dump(2) + "\n");
    write_file_atomic(dir / kStagedMarker,
                      json{{"from_step", start.resume_step}, {"run_id", start.run_id}}.dump() + "\n");
  } catch (const fs::filesystem_error& e) {
    remove_staged(dir);
    throw WriteError(fmt::format("{}: cannot stage the resumed run's metrics: {}; the run is unchanged", dir.string(),
                                 e.code().message()));
  } catch (...) {
    remove_staged(dir);
    throw;
  }
  return dir / kStagedMetrics;
}

void check_resume_compatible(const RunConfig& cfg, const json& saved, const std::string& file) {
  const json now = to_json(cfg);
  if (!saved.is_object() || !saved.contains("model")) throw ConfigError(file + ": checkpoint has no model config");
  const json defaults = to_json(ModelConfig{});  // keys newer than the checkpoint take their defaults
  for (const auto& [k, v] : now["model"].items()) {
    const json old = saved["model"].value(k, defaults[k]);
    if (old != v)
      throw ConfigError(
          fmt::format("{}: model.{} is {} in the checkpoint but {} in this config; a resumed run "
                      "must use the same model",
                      file, k, old.dump(), v.dump()));
  }
  for (const char* section : {"train", "data"}) {
    if (!saved.contains(section)) continue;
    for (const auto& [k, v] : now[section].items()) {
      const auto old = saved[section].value(k, json());
      if (old != v)
        spdlog::warn("{}.{}: {} in the checkpoint, {} now; using {}", section, k, old.dump(), v.dump(), v.dump());
    }
  }
}

void finish_run(const fs::path& dir, const RunSummary& summary) {
  write_file_atomic(dir / "done.json", summary.to_json().dump(2) + "\n");
}

RunDirLock lock_run_dir(const fs::path& dir) {
  return DirLock::acquire(dir, "train", [&](const std::string& holder) {
    return fmt::format(
        "out_dir {} is in use: {} trains in it (it holds {}). Wait for it to finish, or stop it (it saves a "
        "checkpoint) and continue with --resume auto",
        dir.string(), holder, (dir / ".lock").string());
  });
}

RunDirLock lock_new_run_dir(const fs::path& dir) {
  return DirLock::create(dir, "train", [&](const std::string& holder) {
    return fmt::format(
        "out_dir {} is in use: it did not exist when this trainer started, and {} has made it since. Nothing was "
        "changed: once that run is done or stopped, continue it with --resume auto, or choose another --out",
        dir.string(), holder);
  });
}

}  // namespace xsagpt
