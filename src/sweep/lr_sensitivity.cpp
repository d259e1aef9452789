// A ladder's loss across the rates tried, per variant and rung (sweep/lr_sensitivity.h).
#include "sweep/lr_sensitivity.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>

namespace xsagpt {

namespace {

// A point's final val loss as the sensitivity counts it: capped at l0, l0 where the run
// diverged; empty where it has none yet (pending, running, or failed for another reason).
std::optional<double> counted_loss(const json& p, double l0, bool& diverged) {
  diverged = false;
  const auto status = p["status"].get<std::string>();
  const json loss = p.value("final_val_loss", json());
  if (status == "done") {
    if (loss.is_number() && std::isfinite(loss.get<double>())) return std::min(loss.get<double>(), l0);
    diverged = true;  // done.json holds a non-finite loss as null
    return l0;
  }
  const json error = p.value("error", json());
  if (status == "failed" && error.is_string() && error.get<std::string>().find("not finite") != std::string::npos) {
    diverged = true;
    return l0;
  }
  return std::nullopt;
}

}  // namespace

json lr_sensitivity(const Sweep& sweep, const json& points) {
  const SweepLadder& l = *sweep.ladder;
  // (variant, rung, the values of the other keys but the seed) -> multiplier -> points: a
  // curve of loss against the rate per setting, so no other key's values are averaged together.
  // A rung above ladder.tune_rungs runs one rate, the variant's tuned one: no curve.
  std::map<std::tuple<std::string, int, json>, std::map<double, std::vector<size_t>>> groups;
  for (size_t i = 0; i < sweep.points.size(); ++i) {
    const auto& p = sweep.points[i];
    if (!tunes_at(l, static_cast<size_t>(p.rung))) continue;
    json rest = p.values;
    for (const char* k : {"rung", "lr_mult", "train.seed"}) rest.erase(k);
    groups[{p.variant, p.rung, rest}][p.lr_mult].push_back(i);
  }
  json out = json::object();
  for (const auto& v : sweep.variants)
    for (auto it = groups.lower_bound({v, 0, json()}); it != groups.end() && std::get<0>(it->first) == v; ++it) {
      const auto r = static_cast<size_t>(std::get<1>(it->first));
      const double l0 = std::log(static_cast<double>(l.rungs[r].config.model.vocab_size));
      json rates = json::array();
      std::vector<double> losses;
      std::string missing;
      for (const auto& [m, members] : it->second) {
        double sum = 0;
        size_t n = 0, diverged = 0;
        for (size_t i : members) {
          bool d = false;
          if (const auto x = counted_loss(points[i], l0, d)) sum += *x, ++n, diverged += d;
        }
        rates.push_back({{"lr_mult", m},
                         {"lr", l.rungs[r].lr * m},
                         {"loss", n ? json(sum / static_cast<double>(n)) : json(nullptr)},
                         {"n", n},
                         {"diverged", diverged}});
        if (n)
          losses.push_back(sum / static_cast<double>(n));
        else
          missing += fmt::format("{}x{:g}", missing.empty() ? "" : ", ", m);
      }
      json row = {{"rung", l.rungs[r].name},
                  {"values", std::get<2>(it->first)},
                  {"l0", l0},
                  {"rates", rates},
                  {"spread", nullptr},
                  {"sensitivity", nullptr}};
      if (!missing.empty()) {
        row["why"] = fmt::format("no seed finished or diverged yet at rate {}", missing);
      } else {
        const auto [lo, hi] = std::minmax_element(losses.begin(), losses.end());
        double excess = 0;
        for (double x : losses) excess += x - *lo;
        row["spread"] = *hi - *lo;
        row["sensitivity"] = excess / static_cast<double>(losses.size());
      }
      out[v].push_back(row);
    }
  return out;
}

TextTable lr_sensitivity_table(const json& sensitivity, std::vector<std::string>& notes) {
  TextTable t{"", {"variant", "rung"}, {}};
  // A column per multiplier any row tried (with tune_past_edge a variant may have one more).
  std::set<double> mults;
  for (const auto& [v, rows] : sensitivity.items())
    for (const auto& row : rows)
      for (const auto& rate : row["rates"]) mults.insert(rate["lr_mult"].get<double>());
  for (double m : mults) t.head.push_back(fmt::format("x{:g}", m));
  t.head.push_back("spread (max - min)");
  t.head.push_back("LR sensitivity (Wortsman)");
  for (const auto& [v, rows] : sensitivity.items())
    for (const auto& row : rows) {
      std::string where = row["rung"].get<std::string>();
      for (const auto& [k, x] : row["values"].items()) where += fmt::format(", {}={}", k, value_text(x));
      TableRow cells{v, where};
      for (double m : mults) {
        const auto rate = std::find_if(row["rates"].begin(), row["rates"].end(),
                                       [&](const json& r) { return r["lr_mult"].get<double>() == m; });
        if (rate == row["rates"].end() || !(*rate)["loss"].is_number()) {
          cells.push_back("-");
          continue;
        }
        const auto n = (*rate)["n"].get<int64_t>(), d = (*rate)["diverged"].get<int64_t>();
        cells.push_back(fmt::format("{} (n={}{})", bounded_fixed((*rate)["loss"].get<double>(), 4), n,
                                    d ? fmt::format(", {} diverged", d) : ""));
      }
      for (const char* k : {"spread", "sensitivity"})
        cells.push_back(row[k].is_number() ? bounded_fixed(row[k].get<double>(), 4) : "-");
      if (row.contains("why"))
        notes.push_back(fmt::format("{} at {}: no rate sensitivity: {}", v, where, row["why"].get<std::string>()));
      t.rows.push_back(cells);
    }
  return t;
}

}  // namespace xsagpt
