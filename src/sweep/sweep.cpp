#include "sweep/sweep.h"

#include "train/run_dir.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

namespace xsagpt {

namespace fs = std::filesystem;

static std::string value_text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// CSV (RFC 4180): a quote inside a quoted field is doubled; a field holding a comma,
// a quote or a line break is quoted, so a value can never add a column or a row.
static std::string csv_quoted(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out;
}

static std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  return '"' + csv_quoted(text) + '"';
}

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
    if (c == '/' || c == '%' || c == '\\' || c < 0x20 || c == 0x7f) out += fmt::format("%{:02X}", c);
    else out += static_cast<char>(c);
  }
  return out;
}

Sweep load_sweep(const std::string& path, int64_t world_size) {
  Sweep s;
  s.spec = read_json_file(path);
  const auto& spec = s.spec;
  if (!spec.is_object()) schema::bad(path, "a JSON object", spec);
  for (const auto& [k, v] : spec.items())
    if (k != "base" && k != "set" && k != "grid" && k != "constant_batch_tokens" && k != "out_dir")
      throw ConfigError(path + ": unknown key '" + k + "' (known: base, set, grid, constant_batch_tokens, out_dir)");
  if (!spec.contains("base") || !spec["base"].is_string()) throw ConfigError(path + ": base: expected a run config path");
  if (!spec.contains("out_dir") || !spec["out_dir"].is_string()) throw ConfigError(path + ": out_dir: expected a directory");
  if (!spec.contains("grid") || !spec["grid"].is_object() || spec["grid"].empty())
    throw ConfigError(path + ": grid: expected an object of key -> list of values");
  std::vector<std::string> fixed;
  if (spec.contains("set")) {
    if (!spec["set"].is_array()) throw ConfigError(path + ": set: expected a list of \"section.key=value\"");
    for (const auto& o : spec["set"]) {
      if (!o.is_string()) schema::bad(path + ": set", "a list of \"section.key=value\" strings", o);
      fixed.push_back(o.get<std::string>());
    }
  }
  bool constant_tokens = false;
  if (spec.contains("constant_batch_tokens"))
    schema::read_value(spec["constant_batch_tokens"], constant_tokens, path + ": constant_batch_tokens");
  s.dir = spec["out_dir"].get<std::string>();

  fs::path base = spec["base"].get<std::string>();
  if (!fs::exists(base) && fs::exists(fs::path(path).parent_path() / base)) base = fs::path(path).parent_path() / base;
  const auto base_cfg = load_run_config(base.string(), fixed, world_size);

  // Cartesian product over the keys in sorted order (JSON objects are sorted); the last varies fastest.
  std::vector<std::vector<json>> axes;
  for (const auto& [k, v] : spec["grid"].items()) {
    if (!v.is_array() || v.empty()) throw ConfigError(path + ": grid." + k + ": expected a non-empty list");
    s.keys.push_back(k);
    axes.push_back(std::vector<json>(v.begin(), v.end()));
  }
  std::vector<size_t> idx(axes.size(), 0);
  while (true) {
    SweepPoint p;
    p.values = json::object();
    p.overrides = fixed;
    std::string name;
    for (size_t a = 0; a < axes.size(); ++a) {
      const auto& v = axes[a][idx[a]];
      p.values[s.keys[a]] = v;
      p.overrides.push_back(s.keys[a] + "=" + v.dump());
      name += (name.empty() ? "" : ",") + s.keys[a] + "=" + value_text(v);
    }
    // The name is a directory under the sweep's: '/' (and '%', backslash, control
    // characters) are %XX-escaped, so values such as paths or ".." stay one folder
    // inside it; names longer than a file name may be are refused.
    p.name = safe_name_part(name);
    if (p.name.size() > 200)
      throw ConfigError(fmt::format("{}: point {}: the run directory name is {} bytes long (at most 200); use "
                                    "shorter grid values", path, p.name, p.name.size()));
    for (const auto& other : s.points)
      if (other.name == p.name)
        throw ConfigError(fmt::format("{}: grid: two points are both named {} (a value listed twice, e.g. 1e-3 "
                                      "and 0.001?)", path, p.name));
    if (constant_tokens && p.values.contains("train.seq_len")) {
      const int64_t T = p.values["train.seq_len"].get<int64_t>();
      const int64_t micro_tokens = base_cfg.train.micro_batch * base_cfg.train.seq_len;
      const int64_t step_tokens = base_cfg.train.batch_tokens > 0 ? base_cfg.train.batch_tokens
                                                                  : micro_tokens * world_size;
      if (micro_tokens % T != 0 && T < micro_tokens)
        throw ConfigError(fmt::format("{}: constant_batch_tokens: seq_len {} does not divide the base's "
                                      "{} tokens per micro-batch", path, T, micro_tokens));
      p.overrides.push_back(fmt::format("train.micro_batch={}", std::max<int64_t>(1, micro_tokens / T)));
      p.overrides.push_back(fmt::format("train.batch_tokens={}", step_tokens));
    }
    p.overrides.push_back("out_dir=" + json((s.dir / p.name).string()).dump());
    try {
      p.config = load_run_config(base.string(), p.overrides, world_size);
    } catch (const ConfigError& e) {
      throw ConfigError(fmt::format("{}: point {}: {}", path, p.name, e.what()));
    }
    // Two grid values can spell one setting (1 and 1.0, 1e-3 and 0.001): the same run
    // twice would count as two seeds or two learning rates.
    json resolved = to_json(p.config);
    resolved.erase("out_dir");
    for (const auto& other : s.points) {
      json theirs = to_json(other.config);
      theirs.erase("out_dir");
      if (theirs == resolved)
        throw ConfigError(fmt::format("{}: grid: points {} and {} resolve to the same run config (a value listed "
                                      "twice in two spellings?); list each setting once", path, other.name, p.name));
    }
    s.points.push_back(std::move(p));
    size_t a = axes.size();
    while (a > 0 && ++idx[a - 1] == axes[a - 1].size()) idx[--a] = 0;
    if (a == 0) break;
  }
  return s;
}

namespace {

constexpr const char* kSeedKey = "train.seed";

// Mean, sample standard deviation (null below two values), min and max; nulls when empty.
json spread(const std::vector<double>& xs) {
  json j = {{"n", xs.size()}, {"mean", nullptr}, {"std", nullptr}, {"min", nullptr}, {"max", nullptr}};
  if (xs.empty()) return j;
  double sum = 0;
  for (double x : xs) sum += x;
  const double mean = sum / static_cast<double>(xs.size());
  j["mean"] = mean;
  j["min"] = *std::min_element(xs.begin(), xs.end());
  j["max"] = *std::max_element(xs.begin(), xs.end());
  if (xs.size() > 1) {
    double ss = 0;
    for (double x : xs) ss += (x - mean) * (x - mean);
    j["std"] = std::sqrt(ss / static_cast<double>(xs.size() - 1));
  }
  return j;
}

json without(json values, const char* key) {
  values.erase(key);
  return values;
}

// With train.seed in the grid: the points that differ only in their seed form a
// group, summarised by the mean and spread of their final val losses; and for SA
// and XSA groups that differ only in attention, the XSA - SA difference of the
// means with the spread of the per-seed (paired: same seed, same initial weights
// and data order) differences. Only finished points count; n says how many.
json over_seeds(const json& points, const json& diffs) {
  json groups = json::array();
  for (const auto& p : points) {
    const json key = without(p["values"], kSeedKey);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const json& g) { return g["values"] == key; });
    if (it == groups.end()) {
      groups.push_back({{"values", key}, {"seeds", json::array()}, {"points", json::array()}});
      it = groups.end() - 1;
    }
    (*it)["seeds"].push_back(p["values"][kSeedKey]);
    (*it)["points"].push_back(p["name"]);
  }
  for (auto& g : groups) {
    std::vector<double> vals;
    for (const auto& name : g["points"])
      for (const auto& p : points)
        if (p["name"] == name && p["status"] == "done" && p.value("final_val_loss", json()).is_number())
          vals.push_back(p["final_val_loss"].get<double>());
    g["final_val_loss"] = spread(vals);
  }
  json pairs = json::array();
  for (const auto& a : groups) {
    for (const auto& b : groups) {
      if (a["values"].value("model.attention", "") != "sa" || b["values"].value("model.attention", "") != "xsa") continue;
      const json rest = without(a["values"], "model.attention");
      if (rest != without(b["values"], "model.attention")) continue;
      std::vector<double> paired;
      for (const auto& d : diffs)
        if (without(d["values"], kSeedKey) == rest && d["xsa_minus_sa_val_loss"].is_number())
          paired.push_back(d["xsa_minus_sa_val_loss"].get<double>());
      const auto& ma = a["final_val_loss"]["mean"];
      const auto& mb = b["final_val_loss"]["mean"];
      pairs.push_back({{"values", rest},
                       {"sa", a["final_val_loss"]},
                       {"xsa", b["final_val_loss"]},
                       {"xsa_minus_sa_mean", ma.is_number() && mb.is_number() ? json(mb.get<double>() - ma.get<double>())
                                                                              : json(nullptr)},
                       {"xsa_minus_sa_by_seed", spread(paired)}});
    }
  }
  return {{"groups", groups}, {"differences", pairs}};
}

}  // namespace

json sweep_summary(const Sweep& sweep) {
  json points = json::array();
  for (const auto& p : sweep.points) {
    const fs::path dir = p.config.out_dir;
    json e = {{"name", p.name}, {"dir", p.name}, {"values", p.values}};
    if (fs::exists(dir / "done.json")) {
      auto done = read_json_file(dir / "done.json");
      e["status"] = "done";
      for (const char* k : {"final_train_loss", "final_val_loss", "tokens", "wall_s", "step"}) e[k] = done.value(k, json());
    } else if (const auto failure = point_failure(p)) {
      e["status"] = "failed";
      e["error"] = failure->value("error", json("unknown"));
    } else {
      e["status"] = fs::exists(dir / "config.json") ? "running" : "pending";
    }
    points.push_back(e);
  }
  // Pairs that differ only in the attention type.
  json diffs = json::array();
  for (size_t i = 0; i < sweep.points.size(); ++i) {
    for (size_t j = 0; j < sweep.points.size(); ++j) {
      const auto& a = sweep.points[i];
      const auto& b = sweep.points[j];
      if (a.config.model.attention != "sa" || b.config.model.attention != "xsa") continue;
      json va = a.values, vb = b.values;
      va.erase("model.attention");
      vb.erase("model.attention");
      if (va != vb) continue;
      json d = {{"values", va}, {"sa", a.name}, {"xsa", b.name}, {"xsa_minus_sa_val_loss", nullptr}};
      if (points[i]["status"] == "done" && points[j]["status"] == "done" && points[i]["final_val_loss"].is_number() &&
          points[j]["final_val_loss"].is_number())
        d["xsa_minus_sa_val_loss"] = points[j]["final_val_loss"].get<double>() - points[i]["final_val_loss"].get<double>();
      diffs.push_back(d);
    }
  }
  json out = {{"keys", sweep.keys}, {"points", points}, {"differences", diffs}};
  if (std::find(sweep.keys.begin(), sweep.keys.end(), kSeedKey) != sweep.keys.end())
    out["over_seeds"] = over_seeds(points, diffs);
  return out;
}

void write_summary(const Sweep& sweep) {
  const auto summary = sweep_summary(sweep);
  write_file_atomic(sweep.dir / "summary.json", summary.dump(2) + "\n");
  std::ostringstream csv;
  csv << "name";
  for (const auto& k : sweep.keys) csv << "," << csv_field(k);
  csv << ",status,final_train_loss,final_val_loss,tokens,wall_s";
  auto cell = [](const json& v) { return v.is_null() ? std::string() : csv_field(value_text(v)); };
  csv << ",error\n";
  for (const auto& p : summary["points"]) {
    csv << '"' << csv_quoted(p["name"].get<std::string>()) << '"';  // always quoted: names hold ',' between keys
    for (const auto& k : sweep.keys) csv << "," << cell(p["values"][k]);
    csv << "," << p["status"].get<std::string>();
    for (const char* k : {"final_train_loss", "final_val_loss", "tokens", "wall_s", "error"})
      csv << "," << cell(p.value(k, json()));
    csv << "\n";
  }
  write_file_atomic(sweep.dir / "summary.csv", csv.str());

  if (!summary.contains("over_seeds")) return;
  // One row per group of seeds: the other keys' values, then the final val loss over the seeds.
  std::vector<std::string> others;
  for (const auto& k : sweep.keys)
    if (k != kSeedKey) others.push_back(k);
  std::ostringstream seeds;
  for (const auto& k : others) seeds << csv_field(k) << ",";
  seeds << "seeds,n_done,final_val_loss_mean,final_val_loss_std,final_val_loss_min,final_val_loss_max\n";
  for (const auto& g : summary["over_seeds"]["groups"]) {
    for (const auto& k : others) seeds << cell(g["values"][k]) << ",";
    std::string list;
    for (const auto& s : g["seeds"]) list += (list.empty() ? "" : " ") + value_text(s);
    const auto& v = g["final_val_loss"];
    seeds << '"' << csv_quoted(list) << '"' << "," << v["n"].get<int64_t>();
    for (const char* k : {"mean", "std", "min", "max"}) seeds << "," << cell(v[k]);
    seeds << "\n";
  }
  write_file_atomic(sweep.dir / "summary_seeds.csv", seeds.str());
}

}  // namespace xsagpt
