// The start decision (see run_start.h): reads the run directory and the checkpoint,
// writes nothing.
#include "run/run_start.h"

#include "config/resume_check.h"
#include "optim/schedule.h"
#include "run/run_paths.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <random>

namespace xsagpt {

namespace fs = std::filesystem;

namespace {

bool holds_run(const RunPaths& p) {
  return fs::exists(p.config) || fs::exists(p.metrics) || fs::exists(p.done) || !list_checkpoints(p.dir).empty();
}

// What the directory holds, for messages: "checkpoints up to step 40, finished".
std::string describe_run(const RunPaths& p) {
  std::vector<std::string> parts;
  const auto all = list_checkpoints(p.dir);
  parts.push_back(all.empty() ? "no checkpoint"
                              : fmt::format("checkpoints up to step {}", checkpoint_step(all.back())));
  if (fs::exists(p.metrics)) parts.push_back("metrics.jsonl");
  if (fs::exists(p.done)) parts.push_back("finished");
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

// 128 random bits from the kernel, as hex: unique across runs, hosts and restarts.
std::string new_run_id() {
  std::random_device rd;
  std::string id;
  for (int i = 0; i < 4; ++i) id += fmt::format("{:08x}", static_cast<uint32_t>(rd()));
  return id;
}

std::string loss_text(double x) { return std::isfinite(x) ? fmt::format("{:.4f}", x) : "unknown"; }

// The checkpoint's run config; nullopt where it cannot be read as one (an older
// version's), which leaves a branch's rates unchecked.
std::optional<RunConfig> saved_run_config(const json& config, const std::string& file) {
  try {
    return run_config_from_json(config, file);
  } catch (const ConfigError&) {
    return std::nullopt;
  }
}

// A branch: the new run starts from another run's checkpoint (see open_run).
RunOpening open_branch(const RunConfig& cfg, const fs::path& from, int64_t world_size, RunOpening run) {
  RunStart& s = run.start;
  const std::string file = from.string();
  const RunPaths paths(cfg.out_dir);
  std::error_code ec;
  if (same_dir(from.parent_path(), paths.checkpoints) ||
      same_dir(fs::weakly_canonical(from, ec).parent_path(), paths.checkpoints))
    throw ConfigError(
        fmt::format("--branch-from {}: a checkpoint of this run directory's own run; a branch starts "
                    "from another run's",
                    file));
  auto& ck = run.checkpoint.emplace(load_checkpoint(from));
  check_resume_compatible(cfg, ck.config, file);
  if (static_cast<int64_t>(ck.data.loader.size()) != world_size)
    throw ConfigError(
        fmt::format("{}: saved by {} rank(s) but this run has world size {}; branch with the same "
                    "number of processes",
                    file, ck.data.loader.size(), world_size));
  if (ck.step >= cfg.train.max_steps)
    throw ConfigError(
        fmt::format("--branch-from {}: its step {} is not before this run's train.max_steps {}: a "
                    "branch trains on from it",
                    file, ck.step, cfg.train.max_steps));
  if (const auto saved = saved_run_config(ck.config, file)) {
    for (int64_t step = 0; step < ck.step; ++step)
      if (learning_rate(saved->train, step) != learning_rate(cfg.train, step)) {
        spdlog::warn(
            "--branch-from {}: at step {} its run took the rate {:.6g}, this config's schedule {:.6g}: the branch "
            "is not this config's run from scratch (a wsd branch starts at or before its own decay)",
            file, step, learning_rate(saved->train, step), learning_rate(cfg.train, step));
        break;
      }
  }
  s.checkpoint = from;
  s.resume_step = ck.step;
  const std::string source = run_of(from, ck.config);
  if (from.parent_path().filename() == "checkpoints")
    s.history_from = RunPaths(from.parent_path().parent_path()).metrics;
  s.branched_from = {{"run", source}, {"checkpoint", file}, {"step", ck.step}, {"run_id", ck.progress.run_id}};
  spdlog::info("{}: a branch of {} from its step {} ({})", cfg.out_dir, source, ck.step, file);
  return run;
}

}  // namespace

std::string recorded_run_id(const fs::path& dir) {
  const auto j = read_run_file(RunPaths(dir).run_id);  // unreadable: treated as unknown
  return j.is_object() && j.value("run_id", json()).is_string() ? j["run_id"].get<std::string>() : "";
}

RunOpening open_run(const RunConfig& cfg, const std::string& resume, bool overwrite, int64_t world_size,
                    const std::string& branch_from) {
  const RunPaths paths(cfg.out_dir);
  const fs::path& dir = paths.dir;
  RunOpening run;
  RunStart& s = run.start;
  if (resume == "auto" && overwrite)
    throw ConfigError(
        "--resume auto and --overwrite: choose one (--overwrite with --resume PATH continues from "
        "that checkpoint after discarding what the run directory holds)");
  if (!branch_from.empty() && !resume.empty() && resume != "auto")
    throw ConfigError(
        fmt::format("--branch-from {} and --resume {}: choose one (a branch continues its own "
                    "checkpoints once it has some, as --resume auto does)",
                    branch_from, resume));
  const bool holds = holds_run(paths);
  if (resume.empty()) {
    if (holds && !overwrite)
      throw ConfigError(
          fmt::format("out_dir {} already holds a run ({}): pass --resume auto to continue it, "
                      "--overwrite to start over, or choose another --out",
                      dir.string(), describe_run(paths)));
    s.clear = holds;
    s.run_id = new_run_id();
    if (branch_from.empty()) return run;
    return open_branch(cfg, fs::path(branch_from), world_size, std::move(run));
  }
  if (resume == "auto") {
    const auto all = list_checkpoints(dir);
    if (all.empty()) {
      if (holds) {
        spdlog::warn("{}: no checkpoint to resume; starting the run from the beginning", dir.string());
        s.clear = true;
      }
      s.run_id = new_run_id();
      if (branch_from.empty()) return run;
      return open_branch(cfg, fs::path(branch_from), world_size, std::move(run));
    }
    s.checkpoint = all.back();
  } else {
    s.checkpoint = fs::path(resume);
  }

  const std::string file = s.checkpoint->string();
  auto& ck = run.checkpoint.emplace(load_checkpoint(*s.checkpoint));
  check_resume_compatible(cfg, ck.config, file);
  if (!ck.data.loader.is_array() || ck.data.loader.empty())  // a resume starts from it, and counts its ranks
    throw CheckpointError(fmt::format("{}: loader: expected a loader state per rank, got {}", file,
                                      ck.data.loader.dump().substr(0, 200)));
  check_resume_ranks(cfg, ck.config, ck.data.ranks(), world_size, file);
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
  const bool own = same_dir(s.checkpoint->parent_path(), paths.checkpoints) ||
                   (!ec && same_dir(real.parent_path(), paths.checkpoints));
  const auto dir_id = recorded_run_id(dir);
  const auto& ck_id = ck.progress.run_id;
  if (own && !dir_id.empty() && !ck_id.empty() && ck_id != dir_id)
    throw CheckpointError(fmt::format(
        "{} lies in {}/checkpoints but belongs to another run (its run id {}, the directory's {} in run.json): "
        "copied in from elsewhere? Move it out, or resume it into its own --out",
        file, dir.string(), ck_id, dir_id));
  s.run_id = !ck_id.empty() ? ck_id : !dir_id.empty() && own ? dir_id : new_run_id();
  if (!own && holds) {
    if (!overwrite)
      throw ConfigError(fmt::format(
          "out_dir {} already holds another run ({}), and {} is a checkpoint of {}: continuing it there would mix the "
          "two runs. Resume into a new --out, or add --overwrite to discard the run in {} and continue from the "
          "checkpoint there",
          dir.string(), describe_run(paths), file, run_of(*s.checkpoint, ck.config), dir.string()));
    s.clear = true;
  }
  std::vector<int64_t> later;  // the run's own checkpoints past the one resumed
  if (own)
    for (const auto& f : list_checkpoints(dir))
      if (checkpoint_step(f) > ck.step) later.push_back(checkpoint_step(f));

  if (ck.step >= cfg.train.max_steps) {
    const auto& p = ck.progress;
    const RunSummary saved{ck.step, ck.tokens, p.train_loss, p.val_loss, p.elapsed_s, p.rank_changes};
    run.finished = saved;
    if (own && later.empty()) {
      const auto f = finished_run(paths, saved);
      run.finished = f.summary;
      run.record_done = f.record_done;
    }
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
    spdlog::info("wrote {}", RunPaths(cfg.out_dir).done.string());
  }
}

}  // namespace xsagpt
