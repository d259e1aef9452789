// Sweeps, the grid: a grid over run-config keys, every point a normal training run in its
// own directory under the sweep directory, named after its variant and values.
//
// The sweep file (JSON) names a base run config, overrides every point gets ("set"),
// named "variants" with a "baseline", a "grid" over other keys, an optional "ladder"
// (sweep/ladder.h) and "slurm" section (sweep/slurm_spec.h), and the sweep directory
// "out_dir"; its keys are declared, with their help, in sweep/sweep_file.h.
//
// With variants a point is every variant at every grid setting, in a directory named
// "<variant>,<key>=<value>,..." (just "<variant>" without a grid). A variant may not set
// a key the grid sets. A sweep file without "variants" that has model.attention in its
// grid (the older form) keeps its directory names; its attention values are its variants,
// with the baseline "sa" (or "baseline", if given). With a ladder the names are
// "<variant>,rung=<rung>[,ratio=<r>][,lr_mult=<m>],<key>=<value>,...", rung outermost in the
// order, then the ratio (longest first: the run its branches start from comes before them).
#pragma once

#include "config/run_config.h"
#include "sweep/ladder.h"
#include "sweep/slurm_spec.h"

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace xsagpt {

struct LadderStep;  // sweep/ladder_points.h

struct SweepPoint {
  std::string name;                    // "model.attention=xsa,train.lr=0.0006"; its directory under the sweep's
                                       // ('/', '%', backslash, control characters %XX-escaped)
  std::string variant;                 // the variant's name; "" in a sweep without variants
  json values;                         // the grid's values: {"train.lr": 0.0006, "train.seed": 1}
  std::vector<std::string> overrides;  // everything --set would receive
  RunConfig config;                    // resolved and validated
  int rung = -1;                       // its rung in the sweep's ladder; -1 without one
  int budget = -1;                     // its data ratio: an index into the rung's budgets; -1 with one
  double lr_mult = 1;                  // the ladder's multiplier of the rung's rate
  std::optional<size_t> branch_of;     // a branch (sweep/branch.h): the point it starts from
};

struct Sweep {
  json spec;  // the sweep file as read
  std::filesystem::path dir;
  std::vector<std::string> keys;      // "rung" (and "ratio", "lr_mult") with a ladder, then the grid keys, sorted
  std::vector<std::string> variants;  // names, the baseline first; empty: a sweep without variants
  std::string baseline;               // one of variants ("" without)
  std::string variant_key;            // "model.attention" when the grid's attention values are the variants
  std::vector<SweepPoint> points;
  std::optional<SweepLadder> ladder;
  std::vector<LadderTuning> tuning;  // with ladder.tune_rungs: per variant, its tuned rate
  std::vector<SweepPoint> waiting;   // points whose rate the tuning rungs will give: never run as they are
  // Makes the points of one ladder step as load_sweep made the others, handing each to `take`.
  std::function<void(const Sweep&, const LadderStep&, const std::function<void(SweepPoint)>& take)> add_points;
  std::optional<SlurmSpec> slurm;    // how its points run as Slurm jobs (sweep/slurm_spec.h)
};

// A grid value's text made safe as (part of) one directory name: '/', '%', backslash
// and control characters become %XX, so no value can nest or escape the sweep directory.
std::string safe_name_part(const std::string& text);

// Reads and expands a sweep file; every point is validated before anything runs.
Sweep load_sweep(const std::string& path, int64_t world_size);

// Whether `p` is a branch (sweep/branch.h): a rung's shorter data ratio, which starts
// from the rung's longest run, whether linked to it yet or (waiting for a tuned rate) not.
bool is_branch(const Sweep& s, const SweepPoint& p);

// Each branch's source (sweep/branch.h): the point of the same variant and values, the
// ratio aside, at its rung's longest budget. load_sweep links its points; whoever adds
// points later (a tuning ladder's, sweep/ladder_tuning.h) links them again.
void link_branches(Sweep& s);

// A sweep is a queue of independent jobs: a point that fails (divergence, bad data,
// out of memory) gets out_dir/failed.json with the error and the resolved config it
// failed with, and the sweep goes on with the next point. A rerun leaves failed points
// alone unless asked to retry them (xsagpt sweep --retry-failed).
std::filesystem::path failure_file(const SweepPoint& p);
std::optional<json> point_failure(const SweepPoint& p);  // failed.json's contents, if the point failed
void record_failure(const SweepPoint& p, const std::string& error);
void clear_failure(const SweepPoint& p);  // failed.json removed, if there is one

// A grid value as a name or CSV cell shows it: strings bare, everything else as JSON.
std::string value_text(const json& v);

}  // namespace xsagpt
