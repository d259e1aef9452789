#include "sweep/summary.h"

#include "train/run_paths.h"
#include "util/atomic_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

namespace xsagpt {

namespace fs = std::filesystem;

namespace {

// CSV (RFC 4180): a quote inside a quoted field is doubled; a field holding a comma,
// a quote or a line break is quoted, so a value can never add a column or a row.
std::string csv_quoted(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out;
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  return '"' + csv_quoted(text) + '"';
}

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
      if (a["values"].value("model.attention", "") != "sa" || b["values"].value("model.attention", "") != "xsa")
        continue;
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
                       {"xsa_minus_sa_mean",
                        ma.is_number() && mb.is_number() ? json(mb.get<double>() - ma.get<double>()) : json(nullptr)},
                       {"xsa_minus_sa_by_seed", spread(paired)}});
    }
  }
  return {{"groups", groups}, {"differences", pairs}};
}

}  // namespace

json sweep_summary(const Sweep& sweep) {
  json points = json::array();
  for (const auto& p : sweep.points) {
    const RunPaths run(p.config.out_dir);
    json e = {{"name", p.name}, {"dir", p.name}, {"values", p.values}};
    if (fs::exists(run.done)) {
      auto done = read_json_file(run.done);
      e["status"] = "done";
      for (const char* k : {"final_train_loss", "final_val_loss", "tokens", "wall_s", "step"})
        e[k] = done.value(k, json());
    } else if (const auto failure = point_failure(p)) {
      e["status"] = "failed";
      e["error"] = failure->value("error", json("unknown"));
    } else {
      e["status"] = fs::exists(run.config) ? "running" : "pending";
    }
    points.push_back(e);
  }
  // Pairs that differ only in the attention type.
  json diffs = json::array();
  for (size_t i = 0; i < sweep.points.size(); ++i) {
    for (size_t j = 0; j < sweep.points.size(); ++j) {
      const auto& a = sweep.points[i];
      const auto& b = sweep.points[j];
      if (a.config.model.attention != AttentionKind::kSa || b.config.model.attention != AttentionKind::kXsa) continue;
      json va = a.values, vb = b.values;
      va.erase("model.attention");
      vb.erase("model.attention");
      if (va != vb) continue;
      json d = {{"values", va}, {"sa", a.name}, {"xsa", b.name}, {"xsa_minus_sa_val_loss", nullptr}};
      if (points[i]["status"] == "done" && points[j]["status"] == "done" && points[i]["final_val_loss"].is_number() &&
          points[j]["final_val_loss"].is_number())
        d["xsa_minus_sa_val_loss"] =
            points[j]["final_val_loss"].get<double>() - points[i]["final_val_loss"].get<double>();
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
