#include "sweep/grid.h"

#include "config/attention_kinds.h"
#include "config/config_diff.h"
#include "sweep/progress.h"
#include "util/atomic_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
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

// The sweep file's own keys, checked; the grid and the variants are read by load_sweep.
void check_spec(const json& spec, const std::string& path) {
  if (!spec.is_object()) schema::bad(path, "a JSON object", spec);
  for (const auto& [k, v] : spec.items())
    if (k != "base" && k != "set" && k != "grid" && k != "variants" && k != "baseline" &&
        k != "constant_batch_tokens" && k != "out_dir")
      throw ConfigError(path + ": unknown key '" + k +
                        "' (known: base, set, variants, baseline, grid, constant_batch_tokens, out_dir)");
  if (!spec.contains("base") || !spec["base"].is_string())
    throw ConfigError(path + ": base: expected a run config path");
  if (!spec.contains("out_dir") || !spec["out_dir"].is_string())
    throw ConfigError(path + ": out_dir: expected a directory");
  const bool variants = spec.contains("variants");
  if (!variants && (!spec.contains("grid") || !spec["grid"].is_object() || spec["grid"].empty()))
    throw ConfigError(path + ": grid: expected an object of key -> list of values (or \"variants\")");
  if (variants && spec.contains("grid") && !spec["grid"].is_object())
    throw ConfigError(path + ": grid: expected an object of key -> list of values");
}

// Each point runs in its own directory under the sweep's out_dir, set last: an
// out_dir in a variant, the grid or "set" would be ignored without a word.
void refuse_point_out_dir(const std::string& key, const std::string& where) {
  if (key == "out_dir" || key.starts_with("out_dir="))
    throw ConfigError(where +
                      ": out_dir: a point's run directory is the sweep's out_dir/<point name>; set the "
                      "sweep's \"out_dir\" instead");
}

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

// "variants": name -> the overrides that make it, each checked alone against the base
// (through --set's own validation) and against the grid, whose keys it may not set.
std::vector<std::pair<std::string, std::vector<std::string>>> read_variants(const json& spec, const std::string& path,
                                                                            const std::string& base,
                                                                            const std::vector<std::string>& fixed,
                                                                            int64_t world_size) {
  const auto& vs = spec["variants"];
  if (!vs.is_object() || vs.empty())
    throw ConfigError(path + ": variants: expected an object of name -> {\"section.key\": value}, with at least one");
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (const auto& [name, settings] : vs.items()) {
    check_variant_name(name, path);
    const std::string where = path + ": variants." + name;
    if (!settings.is_object()) schema::bad(where, "an object of \"section.key\": value", settings);
    std::vector<std::string> overrides;
    for (const auto& [key, value] : settings.items()) {
      refuse_point_out_dir(key, where);
      if (spec.contains("grid") && spec["grid"].contains(key))
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

// "set": the overrides every point gets.
std::vector<std::string> fixed_overrides(const json& spec, const std::string& path) {
  std::vector<std::string> fixed;
  if (!spec.contains("set")) return fixed;
  if (!spec["set"].is_array()) throw ConfigError(path + ": set: expected a list of \"section.key=value\"");
  for (const auto& o : spec["set"]) {
    if (!o.is_string()) schema::bad(path + ": set", "a list of \"section.key=value\" strings", o);
    refuse_point_out_dir(o.get<std::string>(), path + ": set");
    fixed.push_back(o.get<std::string>());
  }
  return fixed;
}

// constant_batch_tokens: a point with its own seq_len keeps the base's tokens per
// micro-batch and per step, through micro_batch and batch_tokens.
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
class DistinctPoints {
 public:
  explicit DistinctPoints(std::string path) : path_(std::move(path)) {}
  void add(const SweepPoint& p) {
    if (!names_.insert(p.name).second)
      throw ConfigError(
          fmt::format("{}: grid: two points are both named {} (a value listed twice, e.g. 1e-3 "
                      "and 0.001?)",
                      path_, p.name));
    json meaning = saved_meaning(to_json(p.config));
    meaning.erase("out_dir");
    meaning.erase("variant");  // the model's name as written: the model itself is compared
    const auto [it, added] = configs_.try_emplace(std::move(meaning), p.name);
    if (!added)
      throw ConfigError(
          fmt::format("{}: grid: points {} and {} resolve to the same run config (a value listed "
                      "twice in two spellings, or a key set to its default?); list each setting once",
                      path_, it->second, p.name));
  }

 private:
  std::string path_;
  std::set<std::string> names_;
  std::map<json, std::string> configs_;  // resolved config, out_dir aside -> the point's name
};

}  // namespace

Sweep load_sweep(const std::string& path, int64_t world_size) {
  Sweep s;
  s.spec = read_json_file(path);
  const auto& spec = s.spec;
  check_spec(spec, path);
  const auto fixed = fixed_overrides(spec, path);
  bool constant_tokens = false;
  if (spec.contains("constant_batch_tokens"))
    schema::read_value(spec["constant_batch_tokens"], constant_tokens, path + ": constant_batch_tokens");
  s.dir = spec["out_dir"].get<std::string>();
  fs::path base = spec["base"].get<std::string>();
  if (!fs::exists(base) && fs::exists(fs::path(path).parent_path() / base)) base = fs::path(path).parent_path() / base;
  const auto base_cfg = load_run_config(base.string(), fixed, world_size);

  // Cartesian product over the keys in sorted order (JSON objects are sorted); the last varies fastest.
  std::vector<std::vector<json>> axes;
  if (spec.contains("grid"))
    for (const auto& [k, v] : spec["grid"].items()) {
      refuse_point_out_dir(k, path + ": grid");
      if (!v.is_array() || v.empty()) throw ConfigError(path + ": grid." + k + ": expected a non-empty list");
      s.keys.push_back(k);
      axes.push_back(std::vector<json>(v.begin(), v.end()));
    }

  // The variants, the baseline first; a sweep without them has one unnamed variant.
  std::vector<std::pair<std::string, std::vector<std::string>>> variants{{"", {}}};
  std::string baseline;
  if (spec.contains("baseline") && !spec["baseline"].is_string())
    schema::bad(path + ": baseline", "the name of a variant", spec["baseline"]);
  if (spec.contains("baseline")) baseline = spec["baseline"].get<std::string>();
  if (spec.contains("variants")) {
    variants = read_variants(spec, path, base.string(), fixed, world_size);
    std::vector<std::string> names;
    for (const auto& v : variants) names.push_back(v.first);
    if (!spec.contains("baseline"))
      throw ConfigError(fmt::format("{}: baseline: required with variants (one of: {})", path, fmt::join(names, ", ")));
    auto it = std::find_if(variants.begin(), variants.end(), [&](const auto& v) { return v.first == baseline; });
    if (it == variants.end())
      throw ConfigError(
          fmt::format("{}: baseline: '{}' is not a variant (variants: {})", path, baseline, fmt::join(names, ", ")));
    std::rotate(variants.begin(), it, it + 1);
    for (const auto& v : variants) s.variants.push_back(v.first);
    s.baseline = baseline;
  } else if (spec.contains("grid") && spec["grid"].contains("model.attention")) {
    // The older form: the attention values are the variants, the directories keep their names.
    s.variant_key = "model.attention";
    for (const auto& v : spec["grid"]["model.attention"]) s.variants.push_back(value_text(v));
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
  } else if (spec.contains("baseline")) {
    throw ConfigError(path + ": baseline: names a variant, but the sweep has no \"variants\"");
  }

  size_t total = variants.size();
  for (const auto& axis : axes) total *= axis.size();
  SweepProgress progress(path + ": resolving and checking the points", total);
  DistinctPoints distinct(path);
  std::vector<size_t> idx(axes.size(), 0);
  while (true) {
    for (const auto& [variant, variant_overrides] : variants) {  // the variants of one grid setting run together
      SweepPoint p;
      p.values = json::object();
      p.overrides = fixed;
      p.overrides.insert(p.overrides.end(), variant_overrides.begin(), variant_overrides.end());
      std::string name = variant;
      for (size_t a = 0; a < axes.size(); ++a) {
        const auto& v = axes[a][idx[a]];
        p.values[s.keys[a]] = v;
        p.overrides.push_back(s.keys[a] + "=" + v.dump());
        name += (name.empty() ? "" : ",") + s.keys[a] + "=" + value_text(v);
      }
      p.variant = s.variant_key.empty() ? variant : value_text(p.values[s.variant_key]);
      // The name is a directory under the sweep's: '/' (and '%', backslash, control
      // characters) are %XX-escaped, so values such as paths or ".." stay one folder
      // inside it; names longer than a file name may be are refused.
      p.name = safe_name_part(name);
      if (p.name.size() > 200)
        throw ConfigError(
            fmt::format("{}: point {}: the run directory name is {} bytes long (at most 200); use "
                        "shorter grid values",
                        path, p.name, p.name.size()));
      if (constant_tokens && p.values.contains("train.seq_len"))
        for (auto& o : constant_token_overrides(base_cfg, p.values["train.seq_len"].get<int64_t>(), world_size, path))
          p.overrides.push_back(o);
      p.overrides.push_back("out_dir=" + json((s.dir / p.name).string()).dump());
      try {
        p.config = load_run_config(base.string(), p.overrides, world_size);
      } catch (const ConfigError& e) {
        throw ConfigError(fmt::format("{}: point {}: {}", path, p.name, e.what()));
      }
      distinct.add(p);
      s.points.push_back(std::move(p));
      progress.step();
    }
    size_t a = axes.size();
    while (a > 0 && ++idx[a - 1] == axes[a - 1].size()) idx[--a] = 0;
    if (a == 0) break;
  }
  return s;
}

}  // namespace xsagpt
