// The run directory's life cycle. A directory that already holds a run is never
// silently reused: it is resumed (--resume), or cleared on request (--overwrite).
//   out_dir/config.json     resolved config of the run (written at start)
//   out_dir/metrics.jsonl   see train/metrics.h
//   out_dir/checkpoints/    see train/checkpoint.h
//   out_dir/done.json       written once the run reached train.max_steps
#pragma once

#include "config/run_config.h"

#include <filesystem>
#include <optional>

namespace xsagpt {

struct RunStart {
  std::optional<std::filesystem::path> checkpoint;  // resume from this, else fresh
  bool clear = false;                               // remove the previous run's files first
};

// Decides how to start, or throws ConfigError when the directory holds a run and
// neither --resume nor --overwrite was given.
RunStart plan_run_dir(const std::filesystem::path& dir, const std::string& resume, bool overwrite);
// Creates the directory, clears it if planned, writes config.json atomically.
void prepare_run_dir(const std::filesystem::path& dir, const RunConfig& cfg, const RunStart& start);
// A checkpoint's config must describe the same model; train/data changes are
// allowed (e.g. a longer max_steps) and logged.
void check_resume_compatible(const RunConfig& cfg, const json& saved, const std::string& file);
void write_done_file(const std::filesystem::path& dir, const json& summary);
// Writes text to path via a temporary file and rename.
void write_file_atomic(const std::filesystem::path& path, const std::string& text);

}  // namespace xsagpt
