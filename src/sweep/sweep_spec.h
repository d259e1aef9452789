// Sweeps, the sweep file's parts, each read and checked alone: its own keys, "set",
// the variants, constant_batch_tokens' overrides, and the check that no two points
// are one run. load_sweep (sweep/grid.h) puts them together into points.
#pragma once

#include "config/run_config.h"
#include "sweep/sweep_file.h"

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace xsagpt::sweep_spec {

// The top level as read (sweep/sweep_file.h), checked: what its keys need of each other.
void check_spec(const SweepFileSection& file, const std::string& path);

// Each point runs in its own directory under the sweep's out_dir, set last: an
// out_dir in a variant, the grid or "set" would be ignored without a word.
void refuse_point_out_dir(const std::string& key, const std::string& where);

// Keys the ladder sets on every point (sweep/ladder.h), and those its steps are sized
// by (tokens per step): refused in "set", a variant or the grid of a ladder sweep.
void refuse_ladder_key(const std::string& key, const std::string& where);

using Variants = std::vector<std::pair<std::string, std::vector<std::string>>>;

// "variants": name -> the overrides that make it, each checked alone against the base
// (through --set's own validation) and against the grid, whose keys it may not set.
Variants read_variants(const SweepFileSection& file, const std::string& path, const std::string& base,
                       const std::vector<std::string>& fixed, int64_t world_size);

// "set": the overrides every point gets.
std::vector<std::string> fixed_overrides(const SweepFileSection& file, const std::string& path);

// constant_batch_tokens: a point with its own seq_len keeps the base's tokens per
// micro-batch and per step, through micro_batch and batch_tokens.
std::vector<std::string> constant_token_overrides(const RunConfig& base, int64_t T, int64_t world_size,
                                                  const std::string& path);

// A new point must differ from those before it in name and in what its config means
// (config/config_diff.h: saved_meaning, as a resume and a continued sweep read it): two
// grid values can spell one setting (1 and 1.0, 1e-3 and 0.001), two variants can
// spell one model (gated, and gated with model.out_gate at its default "headwise"),
// and the same run twice would count as two seeds, two learning rates or two arms of
// a comparison. Refused rather than merged: a variant the user named would otherwise
// vanish from the tables without a word. Each point's meaning is made once and looked
// up among those before it (ordered by json's own comparison, so 1 and 1.0 still
// meet): n log n for a grid of n points, where comparing every pair made a grid of
// thousands take minutes.
//
// In a ladder, two points can be one run at some rungs only: a rung's size (a
// variant's "last 3" layers are all of a 3-layer rung's) or its own "set" makes them
// one. Such a refusal names the rung, not the grid, so the clashes of a ladder's points
// are gathered and judged once every point is made (finish): a pair that is one run at
// every rung is the grid's or the variants' doing; one that is one run at some rungs
// only is those rungs'.
class DistinctPoints {
 public:
  explicit DistinctPoints(std::string path) : path_(std::move(path)) {}
  // A point's, as sweep/grid.h makes it: its name and config, and in a ladder its variant,
  // values and rung (rung -1 without one).
  void add(const std::string& name, const RunConfig& config, const std::string& variant = "",
           const json& values = json::object(), int rung = -1);
  // Throws for the clashes add() gathered among a ladder's points; rungs: the rungs' names.
  void finish(const std::vector<std::string>& rungs) const;

 private:
  struct Seen {
    std::string name, pair;  // the point's name; its variant and values but the ladder's
  };
  struct Clash {
    int rung;
    std::string first, second, pair;
  };
  std::string path_;
  std::set<std::string> names_;
  std::map<json, Seen> configs_;  // saved meaning, out_dir aside -> the point
  std::vector<Clash> clashes_;
};

}  // namespace xsagpt::sweep_spec
