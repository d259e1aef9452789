#include "train/run_dir.h"

#include "train/checkpoint.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <fstream>

namespace xsagpt {

namespace fs = std::filesystem;

static bool holds_run(const fs::path& dir) {
  return fs::exists(dir / "config.json") || fs::exists(dir / "metrics.jsonl") || !list_checkpoints(dir).empty();
}

RunStart plan_run_dir(const fs::path& dir, const std::string& resume, bool overwrite) {
  RunStart s;
  if (!resume.empty() && overwrite) throw ConfigError("--resume and --overwrite: choose one");
  if (resume == "auto") {
    auto all = list_checkpoints(dir);
    if (!all.empty()) s.checkpoint = all.back();
    else if (holds_run(dir)) {
      spdlog::warn("{}: no checkpoint to resume; starting the run from the beginning", dir.string());
      s.clear = true;
    }
    return s;
  }
  if (!resume.empty()) {
    s.checkpoint = fs::path(resume);
    return s;
  }
  if (holds_run(dir) && !overwrite)
    throw ConfigError(fmt::format("out_dir {} already holds a run: pass --resume auto to continue it, "
                                  "--overwrite to start over, or choose another --out", dir.string()));
  s.clear = overwrite;
  return s;
}

void write_file_atomic(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    out.flush();
    if (!out) throw std::runtime_error(tmp.string() + ": write failed");
  }
  fs::rename(tmp, path);
}

void prepare_run_dir(const fs::path& dir, const RunConfig& cfg, const RunStart& start) {
  fs::create_directories(dir);
  if (start.clear) {
    for (const char* name : {"metrics.jsonl", "done.json", "config.json"}) fs::remove(dir / name);
    fs::remove_all(dir / "checkpoints");
  }
  if (start.checkpoint) fs::remove(dir / "done.json");  // a resumed run is not done until it finishes
  write_file_atomic(dir / "config.json", to_json(cfg).dump(2) + "\n");
}

void check_resume_compatible(const RunConfig& cfg, const json& saved, const std::string& file) {
  const json now = to_json(cfg);
  if (!saved.is_object() || !saved.contains("model"))
    throw ConfigError(file + ": checkpoint has no model config");
  const json defaults = to_json(ModelConfig{});  // keys newer than the checkpoint take their defaults
  for (const auto& [k, v] : now["model"].items()) {
    const json old = saved["model"].value(k, defaults[k]);
    if (old != v)
      throw ConfigError(fmt::format("{}: model.{} is {} in the checkpoint but {} in this config; a resumed run "
                                    "must use the same model", file, k, old.dump(), v.dump()));
  }
  for (const char* section : {"train", "data"}) {
    if (!saved.contains(section)) continue;
    for (const auto& [k, v] : now[section].items()) {
      const auto old = saved[section].value(k, json());
      if (old != v) spdlog::warn("{}.{}: {} in the checkpoint, {} now; using {}", section, k, old.dump(), v.dump(), v.dump());
    }
  }
}

void write_done_file(const fs::path& dir, const json& summary) {
  write_file_atomic(dir / "done.json", summary.dump(2) + "\n");
}

}  // namespace xsagpt
