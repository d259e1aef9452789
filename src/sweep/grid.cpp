// The sweep file read into points: the grid's axes, the variants and the ladder's rungs
// expanded, each point resolved and checked; a failed point's record (see grid.h).
#include "sweep/grid.h"

#include "config/attention_kinds.h"
#include "sweep/ladder_points.h"
#include "sweep/progress.h"
#include "sweep/sweep_spec.h"
#include "util/atomic_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

namespace xsagpt {

namespace fs = std::filesystem;

std::string value_text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

std::filesystem::path failure_file(const SweepPoint& p) { return fs::path(p.config.out_dir) / "failed.json"; }

std::optional<json> point_failure(const SweepPoint& p) {
  const auto file = failure_file(p);
  if (!fs::exists(file)) return std::nullopt;
  try {
    auto j = read_json_file(file);
    if (j.is_object()) return j;
  } catch (const ConfigError&) {  // a failure record cut short still says the point failed
  }
  return json{{"error", "unknown (" + file.string() + " is unreadable)"}};
}

void record_failure(const SweepPoint& p, const std::string& error) {
  const fs::path dir = p.config.out_dir;
  fs::create_directories(dir);
  write_file_atomic(failure_file(p), json{{"error", error}, {"config", to_json(p.config)}}.dump(2) + "\n");
}

void clear_failure(const SweepPoint& p) {
  // Removed only when there: unlinking a name that does not exist fails with EROFS, not
  // ENOENT, on a read-only file system, where a finished sweep may well be read.
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(failure_file(p), ec))) return;
  fs::remove(failure_file(p));
}

std::string safe_name_part(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c == '/' || c == '%' || c == '\\' || c < 0x20 || c == 0x7f)
      out += fmt::format("%{:02X}", c);
    else
      out += static_cast<char>(c);
  }
  return out;
}

namespace {

// The grid's axes: its keys in sorted order (JSON objects are sorted), each with its values.
std::vector<std::vector<json>> read_axes(Sweep& s, const SweepFileSection& file, const std::string& path) {
  std::vector<std::vector<json>> axes;
  if (file.grid.is_null()) return axes;
  for (const auto& [k, v] : file.grid.items()) {
    sweep_spec::refuse_point_out_dir(k, path + ": grid");
    if (!file.ladder.is_null()) sweep_spec::refuse_ladder_key(k, path + ": grid");
    if (!v.is_array() || v.empty()) throw ConfigError(path + ": grid." + k + ": expected a non-empty list");
    s.keys.push_back(k);
    axes.push_back(std::vector<json>(v.begin(), v.end()));
  }
  return axes;
}

// The variants, the baseline first; a sweep without them has one unnamed variant.
sweep_spec::Variants read_sweep_variants(Sweep& s, const SweepFileSection& file, const std::string& path,
                                         const std::string& base, const std::vector<std::string>& fixed,
                                         int64_t world_size) {
  sweep_spec::Variants variants{{"", {}}};
  std::string baseline = file.baseline;
  if (!file.variants.is_null()) {
    variants = sweep_spec::read_variants(file, path, base, fixed, world_size);
    std::vector<std::string> names;
    for (const auto& v : variants) names.push_back(v.first);
    if (baseline.empty())
      throw ConfigError(fmt::format("{}: baseline: required with variants (one of: {})", path, fmt::join(names, ", ")));
    auto it = std::find_if(variants.begin(), variants.end(), [&](const auto& v) { return v.first == baseline; });
    if (it == variants.end())
      throw ConfigError(
          fmt::format("{}: baseline: '{}' is not a variant (variants: {})", path, baseline, fmt::join(names, ", ")));
    std::rotate(variants.begin(), it, it + 1);
    for (const auto& v : variants) s.variants.push_back(v.first);
    s.baseline = baseline;
  } else if (file.grid.is_object() && file.grid.contains("model.attention")) {
    // The older form: the attention values are the variants, the directories keep their names.
    s.variant_key = "model.attention";
    for (const auto& v : file.grid["model.attention"]) s.variants.push_back(value_text(v));
    if (baseline.empty()) {  // the default kind where the grid has it
      const std::string plain = attention_kinds().front().name;
      baseline = std::find(s.variants.begin(), s.variants.end(), plain) != s.variants.end() ? plain : s.variants[0];
    }
    auto it = std::find(s.variants.begin(), s.variants.end(), baseline);
    if (it == s.variants.end())
      throw ConfigError(fmt::format("{}: baseline: '{}' is not a value of grid.model.attention ({})", path, baseline,
                                    fmt::join(s.variants, ", ")));
    std::rotate(s.variants.begin(), it, it + 1);
    s.baseline = baseline;
  } else if (!baseline.empty()) {
    throw ConfigError(path + ": baseline: names a variant, but the sweep has no \"variants\"");
  }
  return variants;
}

// What every point is made from: the sweep file's path, the base config and "set".
struct PointInputs {
  std::string path, base;
  std::vector<std::string> fixed;
  RunConfig base_cfg;
  bool constant_tokens = false;
  int64_t world_size = 1;
};

// One point: the ladder's setting, then the variant, then the grid's values, resolved and checked.
SweepPoint make_point(const Sweep& s, const PointInputs& in, const LadderStep& step,
                      const std::pair<std::string, std::vector<std::string>>& variant,
                      const std::vector<std::pair<std::string, json>>& grid_values) {
  SweepPoint p;
  p.values = step.values;
  p.rung = step.rung;
  p.budget = step.budget;
  p.lr_mult = step.lr_mult;
  p.overrides = in.fixed;
  p.overrides.insert(p.overrides.end(), step.overrides.begin(), step.overrides.end());
  p.overrides.insert(p.overrides.end(), variant.second.begin(), variant.second.end());
  std::string name = variant.first;
  if (!step.name.empty()) name += (name.empty() ? "" : ",") + step.name;
  for (const auto& [key, v] : grid_values) {
    p.values[key] = v;
    p.overrides.push_back(key + "=" + v.dump());
    name += (name.empty() ? "" : ",") + key + "=" + value_text(v);
  }
  p.variant = s.variant_key.empty() ? variant.first : value_text(p.values[s.variant_key]);
  // The name is a directory under the sweep's: '/' (and '%', backslash, control
  // characters) are %XX-escaped, so values such as paths or ".." stay one folder
  // inside it; names longer than a file name may be are refused.
  p.name = safe_name_part(name);
  if (p.name.size() > 200)
    throw ConfigError(
        fmt::format("{}: point {}: the run directory name is {} bytes long (at most 200); use "
                    "shorter grid values",
                    in.path, p.name, p.name.size()));
  if (in.constant_tokens && p.values.contains("train.seq_len"))
    for (auto& o : sweep_spec::constant_token_overrides(in.base_cfg, p.values["train.seq_len"].get<int64_t>(),
                                                        in.world_size, in.path))
      p.overrides.push_back(o);
  p.overrides.push_back("out_dir=" + json((s.dir / p.name).string()).dump());
  try {
    p.config = load_run_config(in.base, p.overrides, in.world_size);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: point {}: {}", in.path, p.name, e.what()));
  }
  return p;
}

// The ladder's rungs (sweep/ladder.h), each resolved from the base with "set" and its own
// overrides, which may not touch what the variants and the grid set.
void read_sweep_ladder(Sweep& s, const SweepFileSection& file, const PointInputs& in) {
  PointKeys others;
  for (const auto& [name, settings] : file.variants.items())
    for (const auto& [key, value] : settings.items()) others[key].push_back("variant " + name);
  if (!file.grid.is_null())
    for (const auto& [key, values] : file.grid.items()) others[key].push_back("the grid");
  s.ladder = read_ladder(
      file.ladder, in.path,
      [&](const std::vector<std::string>& more) {
        auto all = in.fixed;
        all.insert(all.end(), more.begin(), more.end());
        return load_run_config(in.base, all, in.world_size);
      },
      in.world_size, others);
  // The ladder's axes come first in every point's values, name and the summary's columns.
  std::vector<std::string> keys{"rung"};
  if (!s.ladder->rungs.front().budgets.empty()) keys.push_back("ratio");
  if (!s.ladder->lr_multipliers.empty()) keys.push_back("lr_mult");
  s.keys.insert(s.keys.begin(), keys.begin(), keys.end());
}

}  // namespace

bool is_branch(const Sweep& s, const SweepPoint& p) {
  return s.ladder && p.budget >= 0 &&
         static_cast<size_t>(p.budget) + 1 != s.ladder->rungs[static_cast<size_t>(p.rung)].budgets.size();
}

void link_branches(Sweep& s) {
  if (!s.ladder) return;
  auto key = [](const SweepPoint& p) {
    json values = p.values;
    values.erase("ratio");
    return json{p.variant, values};
  };
  std::map<json, size_t> sources;
  for (size_t i = 0; i < s.points.size(); ++i)
    if (s.points[i].budget >= 0 && !is_branch(s, s.points[i])) sources.emplace(key(s.points[i]), i);
  for (auto& p : s.points)
    if (is_branch(s, p)) p.branch_of = sources.at(key(p));
}

Sweep load_sweep(const std::string& path, int64_t world_size) {
  Sweep s;
  s.spec = read_json_file(path);
  SweepFileSection file;
  file_keys::read(s.spec, file, path, ": ");
  sweep_spec::check_spec(file, path);
  PointInputs in{path, file.base, sweep_spec::fixed_overrides(file, path), {}, file.constant_batch_tokens, world_size};
  s.dir = file.out_dir;
  if (!fs::exists(in.base) && fs::exists(fs::path(path).parent_path() / in.base))
    in.base = (fs::path(path).parent_path() / in.base).string();
  in.base_cfg = load_run_config(in.base, in.fixed, world_size);
  const auto axes = read_axes(s, file, path);
  const auto variants = read_sweep_variants(s, file, path, in.base, in.fixed, world_size);
  if (!file.ladder.is_null()) read_sweep_ladder(s, file, in);
  const auto steps = ladder_steps(s.ladder);
  const size_t n_ladder = s.keys.size() - axes.size();

  // The ladder's settings outermost, then the Cartesian product over the grid's keys in
  // sorted order, the last varying fastest; the variants of one grid setting run together.
  size_t total = variants.size() * steps.size();
  for (const auto& axis : axes) total *= axis.size();
  SweepProgress progress(path + ": resolving and checking the points", total);
  sweep_spec::DistinctPoints distinct(path);
  // The points of one ladder step: every variant's (or the step's variant's) at every grid
  // setting. Kept in the sweep, as the points a tuning ladder adds later are made the same way.
  s.add_points = [in, axes, variants, n_ladder](const Sweep& sweep, const LadderStep& step,
                                                const std::function<void(SweepPoint)>& take) {
    std::vector<size_t> idx(axes.size(), 0);
    while (true) {
      std::vector<std::pair<std::string, json>> grid_values;
      for (size_t a = 0; a < axes.size(); ++a) grid_values.emplace_back(sweep.keys[n_ladder + a], axes[a][idx[a]]);
      for (const auto& variant : variants)
        if (step.variant.empty() || step.variant == variant.first)
          take(make_point(sweep, in, step, variant, grid_values));
      size_t a = axes.size();
      while (a > 0 && ++idx[a - 1] == axes[a - 1].size()) idx[--a] = 0;
      if (a == 0) break;
    }
  };
  for (const auto& step : steps)
    s.add_points(s, step, [&](SweepPoint p) {
      distinct.add(p.name, p.config, p.variant, p.values, p.rung);
      s.points.push_back(std::move(p));
      progress.step();
    });
  // A ladder that tunes at its smallest rungs: its larger rungs wait for each variant's
  // rate (at x1 until then, named lr_mult=tuned); sweep/ladder_tuning.h resolves them.
  if (s.ladder)
    for (size_t i = s.ladder->tune_rungs ? s.ladder->tune_rungs : s.ladder->rungs.size(); i < s.ladder->rungs.size();
         ++i)
      for (const auto& step : rung_steps(*s.ladder, i, 1.0, "", "tuned"))
        s.add_points(s, step, [&](SweepPoint p) { s.waiting.push_back(p); });
  std::vector<std::string> rung_names;
  if (s.ladder)
    for (const auto& r : s.ladder->rungs) rung_names.push_back(r.name);
  distinct.finish(rung_names);
  link_branches(s);
  s.slurm = read_slurm(file, path);
  return s;
}

}  // namespace xsagpt
