// Sweeps, the grid: a grid over run-config keys, every point a normal training run in its
// own directory under the sweep directory, named after its values.
//
// Sweep file (JSON):
//   "base":  run config file (relative to the sweep file, or as given)
//   "set":   overrides applied to every point, as --set (optional)
//   "grid":  {"train.lr": [3e-4, 6e-4], "model.attention": ["sa", "xsa"], ...}
//   "constant_batch_tokens": true -> when a point changes train.seq_len, keep
//            tokens per micro-batch (micro_batch * seq_len of the base) and
//            tokens per step (train.batch_tokens) fixed by adjusting the
//            micro-batch and so the accumulation count (the paper's sequence-
//            length study holds 0.5M tokens per step)
//   "out_dir": the sweep directory
#pragma once

#include "config/run_config.h"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace xsagpt {

struct SweepPoint {
  std::string name;                    // "model.attention=xsa,train.lr=0.0006"; its directory under the sweep's
                                       // ('/', '%', backslash, control characters %XX-escaped)
  json values;                         // {"model.attention": "xsa", "train.lr": 0.0006}
  std::vector<std::string> overrides;  // everything --set would receive
  RunConfig config;                    // resolved and validated
};

struct Sweep {
  json spec;  // the sweep file as read
  std::filesystem::path dir;
  std::vector<std::string> keys;  // grid keys, sorted
  std::vector<SweepPoint> points;
};

// A grid value's text made safe as (part of) one directory name: '/', '%', backslash
// and control characters become %XX, so no value can nest or escape the sweep directory.
std::string safe_name_part(const std::string& text);

// Reads and expands a sweep file; every point is validated before anything runs.
Sweep load_sweep(const std::string& path, int64_t world_size);

// A sweep is a queue of independent jobs: a point that fails (divergence, bad data,
// out of memory) gets out_dir/failed.json with the error and the resolved config it
// failed with, and the sweep goes on with the next point. A rerun leaves failed points
// alone unless asked to retry them (xsagpt sweep --retry-failed).
std::filesystem::path failure_file(const SweepPoint& p);
std::optional<json> point_failure(const SweepPoint& p);  // failed.json's contents, if the point failed
void record_failure(const SweepPoint& p, const std::string& error);

// A grid value as a name or CSV cell shows it: strings bare, everything else as JSON.
std::string value_text(const json& v);

}  // namespace xsagpt
