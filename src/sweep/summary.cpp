// A sweep's summary.json, summary.csv and report.md from its points' directories (see summary.h).
#include "sweep/summary.h"

#include "run/metrics_history.h"
#include "run/run_paths.h"
#include "stats/holm.h"
#include "stats/paired.h"
#include "sweep/dial_trend.h"
#include "sweep/iso_loss.h"
#include "sweep/ladder_summary.h"
#include "sweep/point_check.h"
#include "sweep/report.h"
#include "sweep/status.h"
#include "util/atomic_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
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

// With train.seed in the grid: the points of one variant that differ only in their
// seed form a group, summarised by the mean and spread of their final val losses.
// Only finished points count; n says how many. Groups are found through an index, in
// the order of their first point, so a large grid is summarised in n log n.
json seed_groups(const json& points) {
  json groups = json::array();
  std::map<json, size_t> index;  // {variant, values without the seed} -> its group
  std::vector<std::vector<size_t>> members;
  for (size_t i = 0; i < points.size(); ++i) {
    const auto& p = points[i];
    const json key = without(p["values"], kSeedKey);
    const auto [it, added] = index.try_emplace(json::array({p["variant"], key}), groups.size());
    if (added) {
      groups.push_back(
          {{"variant", p["variant"]}, {"values", key}, {"seeds", json::array()}, {"points", json::array()}});
      members.emplace_back();
    }
    auto& g = groups[it->second];
    g["seeds"].push_back(p["values"][kSeedKey]);
    g["points"].push_back(p["name"]);
    members[it->second].push_back(i);
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<double> vals;
    for (size_t i : members[g]) {
      const auto& p = points[i];
      if (p["status"] == "done" && p.value("final_val_loss", json()).is_number())
        vals.push_back(p["final_val_loss"].get<double>());
    }
    groups[g]["final_val_loss"] = spread(vals);
  }
  return {{"groups", groups}};
}

// What a run logged (run/metrics_history.h): val loss against wall-clock time and tokens,
// and its median time per step, the one step time every report uses. Only a run
// point_check.h found usable is read, so its val records are finite numbers.
struct Curves {
  std::vector<double> time, tokens, loss;  // val records
  std::optional<double> step_time;
};

Curves read_curves(const fs::path& file) {
  Curves c;
  const auto history = read_metrics(file);
  for (const auto& r : history.val_curve()) {
    const auto time = r.number("time_s"), loss = r.number("val_loss");
    if (!time || !loss) continue;
    c.time.push_back(*time);
    c.tokens.push_back(r.number("tokens").value_or(0.0));
    c.loss.push_back(*loss);
  }
  c.step_time = history.median_step_time();
  return c;
}

// y at x on the piecewise-linear curve through (xs, ys); empty when x lies outside the
// logged range (answering would mean extrapolating).
std::optional<double> interpolate(const std::vector<double>& xs, const std::vector<double>& ys, double x) {
  if (xs.empty() || x < xs.front() || x > xs.back() * (1 + 1e-12)) return std::nullopt;
  for (size_t i = 1; i < xs.size(); ++i)
    if (x <= xs[i]) {
      const double span = xs[i] - xs[i - 1];
      return span > 0 ? ys[i - 1] + (ys[i] - ys[i - 1]) * (x - xs[i - 1]) / span : ys[i];
    }
  return ys.back();
}

json optional_number(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

// Paired statistics of per-seed differences (stats/paired.h) as summary.json holds them.
json paired_json(const std::vector<double>& diffs, const json& seeds) {
  const auto s = paired_stats(diffs);
  json j = {{"n", s.n},
            {"seeds", seeds},
            {"mean", s.n > 0 ? json(s.mean) : json(nullptr)},
            {"sd", optional_number(s.sd)},
            {"df", s.n > 1 ? json(s.n - 1) : json(nullptr)},
            {"ci95", s.ci_low ? json::array({*s.ci_low, *s.ci_high}) : json(nullptr)},
            {"t", optional_number(s.t)},
            {"p", optional_number(s.p)}};
  return j;
}

// A variant against the baseline at the earlier of the two ends of a pair (their
// final wall-clock times, or token counts), per seed: both val curves read there,
// the one that ended there at its end and the other interpolated, so no curve is
// extrapolated and a variant that is faster than the baseline keeps its seed. A pair
// is refused only where one curve starts after the other ends.
struct AtEnd {
  std::vector<double> diffs;
  json seeds = json::array(), at = json::array(), refused = json::array();
};

void at_earlier_end(AtEnd& out, const std::vector<double>& xs, const std::vector<double>& loss,
                    const std::vector<double>& baseline_xs, const std::vector<double>& baseline_loss, int64_t seed) {
  const double end = std::min(xs.back(), baseline_xs.back());
  const auto y = interpolate(xs, loss, end), yb = interpolate(baseline_xs, baseline_loss, end);
  const char* whose = xs.back() < baseline_xs.back() ? "variant" : baseline_xs.back() < xs.back() ? "baseline" : "both";
  if (y && yb) {
    out.diffs.push_back(*y - *yb);
    out.seeds.push_back(seed);
    out.at.push_back({{"seed", seed}, {"x", end}, {"end_of", whose}, {"val_loss", *y}, {"baseline_val_loss", *yb}});
  } else {
    out.refused.push_back(
        {{"seed", seed}, {"x", end}, {"baseline_start", baseline_xs.front()}, {"variant_start", xs.front()}});
  }
}

// The settings of the other keys (the seed and the variant aside) in point order, each
// with its points: one pass through an index, so a large grid costs n log n, not a scan
// of every point per setting.
struct Settings {
  std::vector<json> values;
  std::vector<std::vector<size_t>> members;
};

Settings group_by_setting(const Sweep& sweep, const json& points) {
  Settings out;
  std::map<json, size_t> index;
  for (size_t i = 0; i < points.size(); ++i) {
    json rest = without(points[i]["values"], kSeedKey);
    if (!sweep.variant_key.empty()) rest.erase(sweep.variant_key);
    const auto [it, added] = index.try_emplace(std::move(rest), out.values.size());
    if (added) {
      out.values.push_back(it->first);
      out.members.emplace_back();
    }
    out.members[it->second].push_back(i);
  }
  return out;
}

bool finished(const json& p) { return p["status"] == "done" && p.value("final_val_loss", json()).is_number(); }

using BySeed = std::map<int64_t, size_t>;  // seed -> index into the points

// Why a seed's pair was left out: the side (or both) that has no finished point.
std::string why_dropped(const json& points, const BySeed& base, const BySeed& mine, int64_t seed,
                        const std::string& baseline, const std::string& variant) {
  const auto b = base.find(seed), m = mine.find(seed);
  auto state = [&](const auto& it, const BySeed& map, const std::string& who) {
    if (it == map.end()) return who + " has no point";
    const auto& p = points[it->second];
    return who + " " + p["status"].template get<std::string>() +
           (p["status"] == "invalid" ? ": " + p["error"].template get<std::string>() : "");
  };
  if (b != base.end() && finished(points[b->second])) return state(m, mine, variant);
  if (m != mine.end() && finished(points[m->second])) return state(b, base, baseline);
  return state(b, base, baseline) + ", " + state(m, mine, variant);
}

std::vector<double> final_losses(const json& points, const BySeed& runs) {
  std::vector<double> out;
  for (const auto& [seed, i] : runs)
    if (finished(points[i])) out.push_back(points[i]["final_val_loss"].get<double>());
  return out;
}

// One variant against the baseline at one setting, paired by seed (the resolved
// train.seed: same initial weights and data order): final val loss; val loss at equal
// wall-clock time and at equal tokens, each pair at the earlier of its two ends; the
// iso-loss multiplier on both axes (sweep/iso_loss.h); and the step-time ratio.
json compare_variant(const Sweep& sweep, const json& points, const BySeed& base, const BySeed& mine,
                     const std::string& v, const std::function<const Curves&(size_t)>& curve) {
  std::vector<double> d_final, ratios;
  json seeds = json::array(), dropped = json::array();
  AtEnd equal_time, equal_tokens;
  IsoLoss iso_tokens, iso_time;
  std::set<int64_t> all;
  for (const auto& [seed, i] : base) all.insert(seed);
  for (const auto& [seed, i] : mine) all.insert(seed);
  for (int64_t seed : all) {
    const auto b = base.find(seed), m = mine.find(seed);
    if (b == base.end() || m == mine.end() || !finished(points[b->second]) || !finished(points[m->second])) {
      dropped.push_back({{"seed", seed}, {"why", why_dropped(points, base, mine, seed, sweep.baseline, v)}});
      continue;
    }
    const double lb = points[b->second]["final_val_loss"].get<double>();
    d_final.push_back(points[m->second]["final_val_loss"].get<double>() - lb);
    seeds.push_back(seed);
    const auto& cb = curve(b->second);
    const auto& cm = curve(m->second);
    if (cb.time.empty() || cm.time.empty()) continue;
    at_earlier_end(equal_time, cm.time, cm.loss, cb.time, cb.loss, seed);
    at_earlier_end(equal_tokens, cm.tokens, cm.loss, cb.tokens, cb.loss, seed);
    iso_tokens.add(seed, lb, cb.tokens, cb.loss, cm.tokens, cm.loss);
    iso_time.add(seed, lb, cb.time, cb.loss, cm.time, cm.loss);
    if (cb.step_time && cm.step_time && *cb.step_time > 0) ratios.push_back(*cm.step_time / *cb.step_time);
  }
  json c = {{"variant", v},
            {"baseline", sweep.baseline},
            {"final_val_loss", spread(final_losses(points, mine))},
            {"baseline_final_val_loss", spread(final_losses(points, base))},
            {"minus_baseline", paired_json(d_final, seeds)}};
  c["minus_baseline"]["dropped"] = dropped;
  for (const auto& [key, e] : {std::pair{"equal_time", &equal_time}, std::pair{"equal_tokens", &equal_tokens}}) {
    c[key] = paired_json(e->diffs, e->seeds);
    c[key]["at"] = e->at;
    c[key]["extrapolation_refused"] = e->refused;
  }
  c["iso_loss"] = {{"tokens", iso_tokens.to_json()}, {"time", iso_time.to_json()}};
  // The seeds' ratios as the ladder pools them (sweep/ladder_analysis.h): a geometric mean,
  // so that a report of the grid and the ladder's rung give one number for one sweep.
  c["step_time_ratio"] = spread(ratios);
  if (!ratios.empty()) {
    double log_sum = 0;
    for (double r : ratios) log_sum += std::log(r);
    c["step_time_ratio"]["geomean"] = std::exp(log_sum / static_cast<double>(ratios.size()));
  } else {
    c["step_time_ratio"]["geomean"] = nullptr;
  }
  return c;
}

// The variants compared with the baseline at one setting are one family per measure
// (stats/holm.h): their p-values are Holm-adjusted together, out[first..] being that setting's.
void holm_per_measure(json& out, size_t first) {
  for (const char* path : {"/minus_baseline", "/equal_time", "/equal_tokens", "/iso_loss/tokens", "/iso_loss/time"}) {
    std::vector<json*> family;
    for (size_t i = first; i < out.size(); ++i) family.push_back(&out[i][json::json_pointer(path)]);
    holm_across(family);
  }
}

// Every variant against the baseline at each setting of the other keys.
json comparisons(const Sweep& sweep, const json& points) {
  json out = json::array();
  if (sweep.variants.size() < 2) return out;
  const Settings settings = group_by_setting(sweep, points);
  for (size_t k = 0; k < settings.values.size(); ++k) {
    std::map<std::string, BySeed> by_variant;
    for (size_t i : settings.members[k])
      by_variant[points[i]["variant"].get<std::string>()][sweep.points[i].config.train.seed] = i;
    std::map<size_t, Curves> curves;  // each point's metrics read once per setting
    const std::function<const Curves&(size_t)> curve = [&](size_t i) -> const Curves& {
      if (!curves.count(i)) curves[i] = read_curves(RunPaths(sweep.points[i].config.out_dir).metrics);
      return curves[i];
    };
    const size_t first = out.size();
    for (const auto& v : sweep.variants) {
      if (v == sweep.baseline) continue;
      json c = compare_variant(sweep, points, by_variant[sweep.baseline], by_variant[v], v, curve);
      c["values"] = settings.values[k];
      out.push_back(std::move(c));
    }
    holm_per_measure(out, first);
  }
  return out;
}

}  // namespace

json sweep_summary(const Sweep& sweep) {
  json points = json::array();
  const auto timing = point_lock_timing();
  const auto clock = sweep_lock_clock(sweep);
  for (const auto& p : sweep.points) {
    json e = {{"name", p.name}, {"dir", p.name}, {"variant", p.variant}, {"values", p.values}};
    // Running only while a live process holds the point's lock, as --status says: a run
    // directory alone may be a killed job's.
    const auto state = point_state(sweep, p, timing, clock);
    e["status"] = state.name();
    e.update(state.record);
    if (state.status == PointStatus::kRunning || state.status == PointStatus::kPending) e["detail"] = state.detail;
    points.push_back(e);
  }
  // Per point: its variant minus the baseline at the same values and seed. The
  // baseline's points are indexed by their values once (linear in the points).
  auto values_of = [&](const SweepPoint& p) {
    json v = p.values;
    if (!sweep.variant_key.empty()) v.erase(sweep.variant_key);
    return v;
  };
  std::map<json, std::vector<size_t>> baseline_at;
  if (!sweep.variants.empty())
    for (size_t i = 0; i < sweep.points.size(); ++i)
      if (sweep.points[i].variant == sweep.baseline) baseline_at[values_of(sweep.points[i])].push_back(i);
  json diffs = json::array();
  for (size_t j = 0; j < sweep.points.size(); ++j) {
    const auto& b = sweep.points[j];
    if (sweep.variants.empty() || b.variant == sweep.baseline) continue;
    const json vb = values_of(b);
    const auto at = baseline_at.find(vb);
    if (at == baseline_at.end()) continue;
    for (size_t i : at->second) {
      const auto& a = sweep.points[i];
      json d = {{"values", vb},
                {"variant", b.variant},
                {"baseline", a.name},
                {"point", b.name},
                {"val_loss_minus_baseline", nullptr}};
      if (points[i]["status"] == "done" && points[j]["status"] == "done" && points[i]["final_val_loss"].is_number() &&
          points[j]["final_val_loss"].is_number())
        d["val_loss_minus_baseline"] =
            points[j]["final_val_loss"].get<double>() - points[i]["final_val_loss"].get<double>();
      diffs.push_back(d);
    }
  }
  json out = {{"keys", sweep.keys}, {"variants", sweep.variants}, {"baseline", sweep.baseline},
              {"points", points},   {"differences", diffs},       {"comparisons", comparisons(sweep, points)}};
  out["trends"] = dial_trends(out);
  if (std::find(sweep.keys.begin(), sweep.keys.end(), kSeedKey) != sweep.keys.end())
    out["over_seeds"] = seed_groups(points);
  if (sweep.ladder) out["ladder"] = ladder_summary(sweep, points);
  return out;
}

json write_summary(const Sweep& sweep) {
  const auto summary = sweep_summary(sweep);
  write_file_atomic_shared(sweep.dir / "summary.json", summary.dump(2) + "\n");
  // A sweep file with variants names them in a column of their own (the older form has model.attention).
  const bool variant_column = !sweep.variants.empty() && sweep.variant_key.empty();
  std::ostringstream csv;
  csv << "name" << (variant_column ? ",variant" : "");
  for (const auto& k : sweep.keys) csv << "," << csv_field(k);
  csv << ",status,final_train_loss,final_val_loss,tokens,wall_s";
  auto cell = [](const json& v) { return v.is_null() ? std::string() : csv_field(value_text(v)); };
  csv << ",error\n";
  for (const auto& p : summary["points"]) {
    csv << '"' << csv_quoted(p["name"].get<std::string>()) << '"';  // always quoted: names hold ',' between keys
    if (variant_column) csv << "," << p["variant"].get<std::string>();
    for (const auto& k : sweep.keys) csv << "," << cell(p["values"][k]);
    csv << "," << p["status"].get<std::string>();
    for (const char* k : {"final_train_loss", "final_val_loss", "tokens", "wall_s", "error"})
      csv << "," << cell(p.value(k, json()));
    csv << "\n";
  }
  write_file_atomic_shared(sweep.dir / "summary.csv", csv.str());
  if (!summary["comparisons"].empty() || summary.contains("ladder"))
    write_file_atomic_shared(sweep.dir / "report.md", sweep_report(summary, sweep.dir));

  if (!summary.contains("over_seeds")) return summary;
  // One row per group of seeds: the other keys' values, then the final val loss over the seeds.
  std::vector<std::string> others;
  for (const auto& k : sweep.keys)
    if (k != kSeedKey) others.push_back(k);
  std::ostringstream seeds;
  if (variant_column) seeds << "variant,";
  for (const auto& k : others) seeds << csv_field(k) << ",";
  seeds << "seeds,n_done,final_val_loss_mean,final_val_loss_std,final_val_loss_min,final_val_loss_max\n";
  for (const auto& g : summary["over_seeds"]["groups"]) {
    if (variant_column) seeds << g["variant"].get<std::string>() << ",";
    for (const auto& k : others) seeds << cell(g["values"][k]) << ",";
    std::string list;
    for (const auto& s : g["seeds"]) list += (list.empty() ? "" : " ") + value_text(s);
    const auto& v = g["final_val_loss"];
    seeds << '"' << csv_quoted(list) << '"' << "," << v["n"].get<int64_t>();
    for (const char* k : {"mean", "std", "min", "max"}) seeds << "," << cell(v[k]);
    seeds << "\n";
  }
  write_file_atomic_shared(sweep.dir / "summary_seeds.csv", seeds.str());
  return summary;
}

}  // namespace xsagpt
