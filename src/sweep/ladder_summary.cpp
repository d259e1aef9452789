// The ladder's results for summary.json (see ladder_summary.h).
#include "sweep/ladder_summary.h"

#include "model/counts.h"
#include "run/run_paths.h"
#include "sweep/ladder_analysis.h"
#include "sweep/lr_sensitivity.h"
#include "sweep/step_time.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

namespace xsagpt {

namespace {

bool usable_loss(const json& p) {
  return p["status"] == "done" && p.value("final_val_loss", json()).is_number() &&
         std::isfinite(p["final_val_loss"].get<double>());
}

json rung_rows(const SweepLadder& l) {
  json rows = json::array();
  for (const auto& r : l.rungs) {
    const auto& m = r.config.model;
    rows.push_back({{"name", r.name},
                    {"n_layer", m.n_layer},
                    {"d_model", m.d_model},
                    {"n_head", m.n_head},
                    {"params", r.params},
                    {"budget_params", r.budget_params},
                    {"tokens", r.tokens()},
                    {"steps", r.steps()},
                    {"warmup_steps", r.config.train.warmup_steps},
                    {"flops_per_token", r.flops_per_token},
                    {"flops", r.flops()},
                    {"lr", r.lr}});
  }
  return rows;
}

// The points of one variant at one rung, by the index of their rate multiplier.
using ByMultiplier = std::map<size_t, std::vector<size_t>>;

size_t multiplier_index(const SweepLadder& l, double m) {
  for (size_t i = 0; i < l.lr_multipliers.size(); ++i)
    if (l.lr_multipliers[i] == m) return i;
  return 0;
}

// The multiplier a variant is judged at on one rung (see ladder_summary.h), and the record of the choice.
std::pair<size_t, json> judged_rate(const SweepLadder& l, const LadderRung& rung, const ByMultiplier& by,
                                    const json& points) {
  json candidates = json::array();
  std::optional<size_t> best;
  size_t best_n = 0;
  double best_mean = 0;
  for (const auto& [mi, members] : by) {
    double sum = 0;
    size_t n = 0;
    for (size_t i : members)
      if (usable_loss(points[i])) sum += points[i]["final_val_loss"].get<double>(), ++n;
    const double m = l.lr_multipliers.empty() ? 1.0 : l.lr_multipliers[mi];
    candidates.push_back({{"lr_mult", m},
                          {"lr", rung.lr * m},
                          {"mean_final_val_loss", n ? json(sum / static_cast<double>(n)) : json(nullptr)},
                          {"n", n},
                          {"points", members.size()}});
    if (n && (!best || n > best_n || (n == best_n && sum / static_cast<double>(n) < best_mean)))
      best = mi, best_n = n, best_mean = sum / static_cast<double>(n);
  }
  const size_t chosen = best.value_or(by.begin()->first);
  const double m = l.lr_multipliers.empty() ? 1.0 : l.lr_multipliers[chosen];
  json choice = {{"rung", rung.name}, {"lr_mult", m},
                 {"lr", rung.lr * m}, {"mean_final_val_loss", best ? json(best_mean) : json(nullptr)},
                 {"n", best_n},       {"candidates", candidates}};
  if (!best) choice["why"] = "no seed finished at any rate";
  if (best && l.lr_multipliers.size() > 1) {
    const auto [lo, hi] = std::minmax_element(l.lr_multipliers.begin(), l.lr_multipliers.end());
    choice["at_edge"] = m == *lo || m == *hi;
  }
  return {chosen, choice};
}

std::string why_left_out(const json& p) {
  const auto status = p["status"].get<std::string>();
  if (status == "done") return "its final val loss is " + p.value("final_val_loss", json()).dump() + ", not finite";
  if (status == "failed" || status == "invalid") return status + ": " + p.value("error", json("")).get<std::string>();
  return status + " (not finished)";
}

}  // namespace

json ladder_summary(const Sweep& sweep, const json& points) {
  const SweepLadder& l = *sweep.ladder;
  // (variant, rung) -> multiplier -> points
  std::map<std::pair<std::string, int>, ByMultiplier> groups;
  for (size_t i = 0; i < sweep.points.size(); ++i) {
    const auto& p = sweep.points[i];
    groups[{p.variant, p.rung}][multiplier_index(l, p.lr_mult)].push_back(i);
  }
  json choice = json::object(), obs_json = json::array(), left_out = json::array();
  std::vector<LadderObservation> obs;
  for (const auto& v : sweep.variants)
    for (size_t r = 0; r < l.rungs.size(); ++r) {
      const auto it = groups.find({v, static_cast<int>(r)});
      if (it == groups.end()) continue;
      const auto [chosen, record] = judged_rate(l, l.rungs[r], it->second, points);
      if (!l.lr_multipliers.empty()) choice[v].push_back(record);
      for (size_t i : it->second.at(chosen)) {
        const auto& p = sweep.points[i];
        const json entry = {
            {"point", p.name}, {"variant", v}, {"rung", l.rungs[r].name}, {"seed", p.config.train.seed}};
        if (!usable_loss(points[i])) {
          left_out.push_back(entry);
          left_out.back()["why"] = why_left_out(points[i]);
          continue;
        }
        const double tokens = points[i].value("tokens", json()).is_number() ? points[i]["tokens"].get<double>()
                                                                            : static_cast<double>(l.rungs[r].tokens());
        const double compute = flops_per_token(p.config.model, p.config.train.seq_len) * tokens;
        const double loss = points[i]["final_val_loss"].get<double>();
        const auto step_time = median_step_time(RunPaths(p.config.out_dir).metrics);
        obs.push_back({v, static_cast<int>(r), p.config.train.seed, compute, loss, step_time});
        obs_json.push_back(entry);
        obs_json.back().update({{"lr_mult", p.lr_mult},
                                {"compute", compute},
                                {"loss", loss},
                                {"step_time_s", step_time ? json(*step_time) : json(nullptr)}});
      }
    }
  LadderOptions opt;
  opt.baseline = sweep.baseline;
  for (const auto& v : sweep.variants)
    if (v != sweep.baseline) opt.variants.push_back(v);
  opt.extrapolate_to = l.extrapolate_to;
  opt.extrapolate_decades = l.extrapolate_decades;
  opt.extrapolate_decades_asked = l.extrapolate_decades_asked;
  json analysis;
  try {
    analysis = ladder_analysis(obs, opt);
  } catch (const std::exception& e) {
    analysis = {{"error", e.what()}};
  }
  json out = {{"rules",
               {{"size", l.size_rule},
                {"tokens", l.token_rule},
                {"lr", l.lr_rule},
                {"lr_multipliers", l.lr_multipliers},
                {"schedule", l.schedule_rule},
                {"extrapolate_decades", l.extrapolate_decades}}},
              {"rungs", rung_rows(l)},
              {"observations", obs_json},
              {"left_out", left_out},
              {"analysis", analysis}};
  if (!l.lr_multipliers.empty()) out["lr_choice"] = choice;
  if (!l.lr_multipliers.empty()) out["lr_sensitivity"] = lr_sensitivity(sweep, points);
  if (l.extrapolate_to.empty()) out["extrapolation_note"] = l.extrapolate_note;
  return out;
}

}  // namespace xsagpt
