// The names of a run directory's files (see run_paths.h).
#include "run/run_paths.h"

#include "config/model_config.h"

namespace xsagpt {

namespace fs = std::filesystem;

RunPaths::RunPaths(const fs::path& d)
    : dir(d),
      config(d / "config.json"),
      metrics(d / "metrics.jsonl"),
      damaged_metrics(d / "metrics.jsonl.damaged"),
      checkpoints(d / "checkpoints"),
      done(d / "done.json"),
      run_id(d / "run.json"),
      lock(d / ".lock"),
      staged_marker(d / "staged.json"),
      staged_config(d / "config.json.staged"),
      staged_metrics(d / "metrics.jsonl.staged"),
      staged_damaged(d / "metrics.jsonl.damaged.staged") {}

std::vector<fs::path> RunPaths::staged() const {
  return {staged_marker, staged_config, staged_metrics, staged_damaged};
}

std::vector<fs::path> RunPaths::history() const { return {metrics, damaged_metrics, done, config, run_id}; }

fs::path temporary(const fs::path& file) { return file.string() + ".tmp"; }

nlohmann::json read_run_file(const fs::path& file) {
  if (!fs::exists(file)) return nullptr;
  try {
    return read_json_file(file);
  } catch (const ConfigError&) {
    return nullptr;
  }
}

}  // namespace xsagpt
