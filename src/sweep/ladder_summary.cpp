// The ladder's results for summary.json (see ladder_summary.h).
#include "sweep/ladder_summary.h"

#include "model/counts.h"
#include "run/run_paths.h"
#include "sweep/ladder_analysis.h"
#include "sweep/ladder_surface.h"
#include "sweep/ladder_tuning.h"
#include "sweep/lr_sensitivity.h"
#include "run/metrics_history.h"

#include <fmt/format.h>

#include <algorithm>
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
    for (const auto& b : r.budgets)
      rows.back()["budgets"].push_back({{"ratio", b.ratio},
                                        {"steps", b.steps},
                                        {"tokens", b.steps * r.step_tokens},
                                        {"branch_step", b.branch_step}});
  }
  return rows;
}

// The points of one variant at one rung, by their rate multiplier.
using ByMultiplier = std::map<double, std::vector<size_t>>;

// The multiplier a variant is judged at on one rung (see ladder_summary.h), and the record of the choice.
std::pair<double, json> judged_rate(const LadderRung& rung, const ByMultiplier& by, const json& points) {
  json candidates = json::array();
  std::optional<double> best;
  size_t best_n = 0;
  double best_mean = 0;
  for (const auto& [m, members] : by) {
    double sum = 0;
    size_t n = 0;
    for (size_t i : members)
      if (usable_loss(points[i])) sum += points[i]["final_val_loss"].get<double>(), ++n;
    candidates.push_back({{"lr_mult", m},
                          {"lr", rung.lr * m},
                          {"mean_final_val_loss", n ? json(sum / static_cast<double>(n)) : json(nullptr)},
                          {"n", n},
                          {"points", members.size()}});
    if (n && (!best || n > best_n || (n == best_n && sum / static_cast<double>(n) < best_mean)))
      best = m, best_n = n, best_mean = sum / static_cast<double>(n);
  }
  const double m = best.value_or(by.begin()->first);
  json choice = {{"rung", rung.name}, {"lr_mult", m},
                 {"lr", rung.lr * m}, {"mean_final_val_loss", best ? json(best_mean) : json(nullptr)},
                 {"n", best_n},       {"candidates", candidates}};
  if (!best) choice["why"] = "no seed finished at any rate";
  // The edge of the multipliers tried at this rung (with tune_past_edge, a variant's own).
  if (best && by.size() > 1) choice["at_edge"] = m == by.begin()->first || m == by.rbegin()->first;
  return {m, choice};
}

// summary.json's "tuning" (with tune_rungs): per variant the multiplier carried up, where
// it comes from, and the candidates it was chosen from.
json tuning_json(const Sweep& sweep) {
  const auto& l = *sweep.ladder;
  json out = json::object();
  for (const auto& t : sweep.tuning) {
    json rungs = json::array();
    for (size_t i = 0; i < l.tune_rungs; ++i) rungs.push_back(l.rungs[i].name);
    out[t.variant] = {{"lr_mult", t.lr_mult ? json(*t.lr_mult) : json(nullptr)},
                      {"tuned_at", rungs},
                      {"carried_by", t.mup ? "mup" : "rate rule"},
                      {"origin", tuning_origin(l, t)},
                      {"at_edge", t.at_edge},
                      {"past_edge", t.past_edge ? json(*t.past_edge) : json(nullptr)},
                      {"candidates", t.candidates}};
    if (!t.lr_mult) out[t.variant]["waits"] = t.waits;
  }
  return out;
}

std::string why_left_out(const json& p) {
  const auto status = p["status"].get<std::string>();
  if (status == "done") return "its final val loss is " + p.value("final_val_loss", json()).dump() + ", not finite";
  if (status == "failed" || status == "invalid") return status + ": " + p.value("error", json("")).get<std::string>();
  return status + " (not finished)";
}

// The fit across rungs of the points at one data ratio (`budget`: an index into the
// rungs' budgets; -1 with one): the rate each variant is judged at, the observations,
// the points left out and the analysis.
json ratio_results(const Sweep& sweep, const json& points, int budget) {
  const SweepLadder& l = *sweep.ladder;
  // (variant, rung) -> multiplier -> points
  std::map<std::pair<std::string, int>, ByMultiplier> groups;
  for (size_t i = 0; i < sweep.points.size(); ++i) {
    const auto& p = sweep.points[i];
    if (p.budget == budget) groups[{p.variant, p.rung}][p.lr_mult].push_back(i);
  }
  json choice = json::object(), obs_json = json::array(), left_out = json::array();
  std::vector<LadderObservation> obs;
  for (const auto& v : sweep.variants)
    for (size_t r = 0; r < l.rungs.size(); ++r) {
      const auto it = groups.find({v, static_cast<int>(r)});
      if (it == groups.end()) continue;
      auto [chosen, record] = judged_rate(l.rungs[r], it->second, points);
      if (!tunes_at(l, r)) {  // one multiplier here: the variant's tuned one
        const auto t =
            std::find_if(sweep.tuning.begin(), sweep.tuning.end(), [&](const auto& x) { return x.variant == v; });
        record["origin"] = tuning_origin(l, *t);
        record["at_edge"] = t->at_edge;
      }
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
        const double tokens = points[i].value("tokens", json()).is_number()
                                  ? points[i]["tokens"].get<double>()
                                  : static_cast<double>(p.config.train.max_steps * l.rungs[r].step_tokens);
        const double compute = flops_per_token(p.config.model, p.config.train.seq_len) * tokens;
        const double loss = points[i]["final_val_loss"].get<double>();
        const auto step_time = read_metrics(RunPaths(p.config.out_dir).metrics).median_step_time();
        obs.push_back({v, static_cast<int>(r), p.config.train.seed, compute, loss, step_time});
        obs_json.push_back(entry);
        obs_json.back().update({{"lr_mult", p.lr_mult},
                                {"tokens", tokens},
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
  json out = {{"observations", obs_json}, {"left_out", left_out}, {"analysis", analysis}};
  if (!l.lr_multipliers.empty()) out["lr_choice"] = choice;
  return out;
}

// The fit across ratios (sweep/ladder_surface.h) from every ratio's observations.
json surface_results(const Sweep& sweep, const json& ratios) {
  const SweepLadder& l = *sweep.ladder;
  std::map<std::string, double> params;  // rung -> the parameters its token rule counts
  std::vector<std::pair<std::string, double>> budgets;
  for (const auto& r : l.rungs) {
    params[r.name] = static_cast<double>(r.budget_params);
    budgets.emplace_back(r.name, 6 * params[r.name] * static_cast<double>(r.tokens()));
  }
  budgets.insert(budgets.end(), l.extrapolate_to.begin(), l.extrapolate_to.end());
  std::vector<SurfaceObservation> obs;
  for (const auto& ratio : ratios)
    for (const auto& o : ratio["observations"])
      obs.push_back({o["variant"].get<std::string>(), params.at(o["rung"].get<std::string>()),
                     o["tokens"].get<double>(), o["loss"].get<double>()});
  std::vector<std::string> variants;
  for (const auto& v : sweep.variants)
    if (v != sweep.baseline) variants.push_back(v);
  return ladder_surface(obs, sweep.baseline, variants, budgets, l.extrapolate_decades);
}

}  // namespace

json ladder_summary(const Sweep& sweep, const json& points) {
  const SweepLadder& l = *sweep.ladder;
  json out = {{"rules",
               {{"size", l.size_rule},
                {"tokens", l.token_rule},
                {"lr", l.lr_rule},
                {"lr_multipliers", l.lr_multipliers},
                {"schedule", l.schedule_rule},
                {"extrapolate_decades", l.extrapolate_decades}}},
              {"rungs", rung_rows(l)}};
  const int budgets = static_cast<int>(l.rungs.front().budgets.size());
  if (budgets == 0) {
    out.update(ratio_results(sweep, points, -1));
  } else {
    out["ratios"] = json::array();
    for (int b = 0; b < budgets; ++b) {
      out["ratios"].push_back({{"ratio", l.rungs.front().budgets[b].ratio}});
      out["ratios"].back().update(ratio_results(sweep, points, b));
    }
    const json longest = out["ratios"].back();  // the rungs' own runs
    out.update(longest);
    out["surface"] = surface_results(sweep, out["ratios"]);
  }
  if (l.tune_rungs) out["tuning"] = tuning_json(sweep);
  if (!l.lr_multipliers.empty()) out["lr_sensitivity"] = lr_sensitivity(sweep, points);
  if (l.extrapolate_to.empty()) out["extrapolation_note"] = l.extrapolate_note;
  return out;
}

}  // namespace xsagpt
