// The sweep file's parts, read and checked (see sweep_spec.h).
#include "sweep/sweep_spec.h"

#include "config/config_diff.h"
#include "sweep/ladder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace xsagpt::sweep_spec {

void check_spec(const SweepFileSection& file, const std::string& path) {
  const bool variants = !file.variants.is_null();
  if (!variants && (file.grid.is_null() || file.grid.empty()))
    throw ConfigError(path + ": grid: expected an object of key -> list of values (or \"variants\")");
  if (!file.ladder.is_null() && !variants)
    throw ConfigError(path + ": ladder: needs \"variants\" and a \"baseline\" (the ladder compares them size by size)");
  if (!file.ladder.is_null() && file.constant_batch_tokens)
    throw ConfigError(path +
                      ": constant_batch_tokens: not with a ladder, whose rungs' steps are sized by the base's "
                      "tokens per step");
}

void refuse_point_out_dir(const std::string& key, const std::string& where) {
  if (key == "out_dir" || key.starts_with("out_dir="))
    throw ConfigError(where +
                      ": out_dir: a point's run directory is the sweep's out_dir/<point name>; set the "
                      "sweep's \"out_dir\" instead");
}

void refuse_ladder_key(const std::string& key_or_override, const std::string& where) {
  const std::string key = key_or_override.substr(0, key_or_override.find('='));
  const auto& owned = ladder_keys();
  if (std::find(owned.begin(), owned.end(), key) != owned.end())
    throw ConfigError(
        fmt::format("{}: {} is set by the ladder on every point (its size, schedule and rate rules); "
                    "a ladder rung's own \"set\" takes other keys",
                    where, key));
  if (key == "train.seq_len" || key == "train.micro_batch" || key == "train.batch_tokens")
    throw ConfigError(
        fmt::format("{}: {}: the ladder sizes each rung's steps by its tokens per step; set it in "
                    "\"set\" (every point) or a rung's own \"set\"",
                    where, key));
}

namespace {

// A variant's name is a directory name and a label in tables and figures.
void check_variant_name(const std::string& name, const std::string& path) {
  const bool ok = !name.empty() && name.size() <= 64 && name[0] != '.' &&
                  std::all_of(name.begin(), name.end(), [](unsigned char c) {
                    return std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '+';
                  });
  if (!ok)
    throw ConfigError(
        fmt::format("{}: variants: name '{}': expected 1-64 letters, digits, '-', '_', '+' or '.' "
                    "(not first), as it names directories",
                    path, name));
}

}  // namespace

Variants read_variants(const SweepFileSection& file, const std::string& path, const std::string& base,
                       const std::vector<std::string>& fixed, int64_t world_size) {
  const auto& vs = file.variants;
  if (vs.empty())
    throw ConfigError(path + ": variants: expected an object of name -> {\"section.key\": value}, with at least one");
  Variants out;
  for (const auto& [name, settings] : vs.items()) {
    check_variant_name(name, path);
    const std::string where = path + ": variants." + name;
    if (!settings.is_object()) schema::bad(where, "an object of \"section.key\": value", settings);
    std::vector<std::string> overrides;
    for (const auto& [key, value] : settings.items()) {
      refuse_point_out_dir(key, where);
      if (!file.ladder.is_null()) refuse_ladder_key(key, where);
      if (file.grid.is_object() && file.grid.contains(key))
        throw ConfigError(
            fmt::format("{}: {} is also in the grid; set it in the variants or the grid, not both", where, key));
      overrides.push_back(key + "=" + value.dump());
    }
    auto all = fixed;
    all.insert(all.end(), overrides.begin(), overrides.end());
    try {
      load_run_config(base, all, world_size);
    } catch (const ConfigError& e) {
      throw ConfigError(where + ": " + e.what());
    }
    out.emplace_back(name, std::move(overrides));
  }
  return out;
}

std::vector<std::string> fixed_overrides(const SweepFileSection& file, const std::string& path) {
  for (const auto& o : file.set) {
    refuse_point_out_dir(o, path + ": set");
    // The base's schedule keys in "set" are the shape the ladder stretches to each
    // rung's steps (sweep/ladder.h); its size and rate would be replaced without a word.
    const auto key = o.substr(0, o.find('='));
    if (!file.ladder.is_null() && (key.starts_with("model.") || key == "train.lr")) {
      const auto& owned = ladder_keys();
      if (std::find(owned.begin(), owned.end(), key) != owned.end()) refuse_ladder_key(key, path + ": set");
    }
  }
  return file.set;
}

std::vector<std::string> constant_token_overrides(const RunConfig& base, int64_t T, int64_t world_size,
                                                  const std::string& path) {
  const int64_t micro_tokens = base.train.micro_batch * base.train.seq_len;
  const int64_t step_tokens = base.train.batch_tokens > 0 ? base.train.batch_tokens : micro_tokens * world_size;
  if (micro_tokens % T != 0 && T < micro_tokens)
    throw ConfigError(
        fmt::format("{}: constant_batch_tokens: seq_len {} does not divide the base's "
                    "{} tokens per micro-batch",
                    path, T, micro_tokens));
  return {fmt::format("train.micro_batch={}", std::max<int64_t>(1, micro_tokens / T)),
          fmt::format("train.batch_tokens={}", step_tokens)};
}

void DistinctPoints::add(const std::string& name, const RunConfig& config, const std::string& variant,
                         const json& point_values, int rung) {
  if (!names_.insert(name).second)
    throw ConfigError(
        fmt::format("{}: grid: two points are both named {} (a value listed twice, e.g. 1e-3 "
                    "and 0.001?)",
                    path_, name));
  json meaning = saved_meaning(to_json(config));
  meaning.erase("out_dir");
  meaning.erase("variant");  // the model's name as written: the model itself is compared
  json values = point_values;
  values.erase("rung");
  values.erase("ratio");
  values.erase("lr_mult");
  const std::string pair = variant + " " + values.dump();
  const auto [it, added] = configs_.try_emplace(std::move(meaning), Seen{name, pair});
  if (added) return;
  if (rung >= 0) {
    clashes_.push_back({rung, it->second.name, name, it->second.pair + " = " + pair});
    return;
  }
  throw ConfigError(
      fmt::format("{}: grid: points {} and {} resolve to the same run config (a value listed "
                  "twice in two spellings, or a key set to its default?); list each setting once",
                  path_, it->second.name, name));
}

void DistinctPoints::finish(const std::vector<std::string>& rungs) const {
  if (clashes_.empty()) return;
  std::map<std::string, std::set<int>> at;  // each clashing pair -> the rungs it clashes at
  for (const auto& c : clashes_) at[c.pair].insert(c.rung);
  for (const auto& c : clashes_) {
    if (at[c.pair].size() < rungs.size())
      throw ConfigError(fmt::format(
          "{}: ladder rung {}: points {} and {} resolve to the same run config at this rung, though they differ at "
          "others (the rung's size or its own \"set\" makes them one run); change the rung or the variants",
          path_, rungs.at(static_cast<size_t>(c.rung)), c.first, c.second));
  }
  const auto& c = clashes_.front();
  throw ConfigError(
      fmt::format("{}: grid: points {} and {} resolve to the same run config (a value listed "
                  "twice in two spellings, or a key set to its default?); list each setting once",
                  path_, c.first, c.second));
}

}  // namespace xsagpt::sweep_spec
