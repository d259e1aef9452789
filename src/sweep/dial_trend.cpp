// The paired difference's trend along a numeric grid key (sweep/dial_trend.h).
#include "sweep/dial_trend.h"

#include "stats/line_fit.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <set>
#include <tuple>

namespace xsagpt {

namespace {

constexpr const char* kDialSeedKey = "train.seed";

// Whether every difference's values give `key` a positive number, two distinct ones or more.
bool is_dial(const json& differences, const std::string& key) {
  if (key == kDialSeedKey) return false;
  std::set<double> seen;
  for (const auto& d : differences) {
    const auto& v = d["values"].value(key, json());
    if (!v.is_number() || !(v.get<double>() > 0)) return false;
    seen.insert(v.get<double>());
  }
  return seen.size() >= 2;
}

// The trend of one variant along `key` at one setting of the others, from its pairs.
// A dial's pairs: the key's value as the grid gave it, and the difference.
using DialPairs = std::vector<std::pair<json, double>>;

json dial_trend_of(const std::string& key, const std::string& variant, const json& rest, const DialPairs& pairs) {
  std::vector<double> x, y;
  std::map<double, std::tuple<json, int64_t, double>> levels;  // value -> as given, n, sum
  for (const auto& [value, diff] : pairs) {
    x.push_back(std::log2(value.get<double>()));
    y.push_back(diff);
    auto& [given, n, sum] = levels[value.get<double>()];
    given = value, n += 1, sum += diff;
  }
  json by_level = json::array();
  for (const auto& [v, l] : levels) {
    const auto& [given, n, sum] = l;
    by_level.push_back({{"value", given}, {"n", n}, {"mean", sum / static_cast<double>(n)}});
  }
  json j = {{"key", key},         {"variant", variant}, {"values", rest},  {"n", pairs.size()},
            {"levels", by_level}, {"slope", nullptr},   {"ci95", nullptr}, {"df", nullptr}};
  const auto line = fit_line(x, y);
  if (!line) {
    j["why"] = fmt::format("finished pairs at {} value(s) of {}: no slope", levels.size(), key);
    return j;
  }
  j["slope"] = line->slope;
  if (!line->ci_low) {
    j["why"] = "two pairs: the line passes through both, no interval";
    return j;
  }
  j["ci95"] = json::array({*line->ci_low, *line->ci_high});
  j["df"] = line->n - 2;
  return j;
}

}  // namespace

json dial_trends(const json& summary) {
  json out = json::array();
  const auto& differences = summary.value("differences", json::array());
  if (differences.empty()) return out;
  for (const auto& k : summary.value("keys", json::array())) {
    const auto key = k.get<std::string>();
    if (!is_dial(differences, key)) continue;
    // The groups in the order of their first difference: (variant, other keys) -> (value, difference).
    std::vector<std::pair<std::string, json>> groups;
    std::map<std::pair<std::string, json>, DialPairs> pairs;
    for (const auto& d : differences) {
      json rest = d["values"];
      rest.erase(key);
      rest.erase(kDialSeedKey);
      const std::pair<std::string, json> group{d["variant"].get<std::string>(), rest};
      const auto [it, added] = pairs.try_emplace(group);
      if (added) groups.push_back(group);
      if (d["val_loss_minus_baseline"].is_number())
        it->second.emplace_back(d["values"][key], d["val_loss_minus_baseline"].get<double>());
    }
    for (const auto& g : groups) out.push_back(dial_trend_of(key, g.first, g.second, pairs[g]));
  }
  return out;
}

}  // namespace xsagpt
