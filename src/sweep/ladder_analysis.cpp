// The analysis across a ladder's rungs (sweep/ladder_analysis.h).
#include "sweep/ladder_analysis.h"

#include "stats/bootstrap.h"
#include "stats/holm.h"
#include "stats/huber_fit.h"
#include "stats/line_fit.h"
#include "stats/paired.h"
#include "stats/scaling_fit.h"
#include "util/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

namespace xsagpt {

using json = nlohmann::json;

namespace {

// A ladder's observations indexed: curve 0 is the baseline, then the variants in the
// options' order; per curve and rung, its seeds' points and their mean compute.
struct RungPoint {
  size_t seed;  // index into Ladder::seeds
  double compute, loss;
  std::optional<double> step_time;
};

struct Ladder {
  std::vector<std::string> names;
  std::vector<int64_t> seeds;  // sorted
  std::vector<int> rungs;      // sorted, every rung of any curve
  std::vector<std::map<int, std::vector<RungPoint>>> at;
  std::vector<std::map<int, double>> compute;
};

Ladder index_ladder(const std::vector<LadderObservation>& obs, const LadderOptions& opt) {
  if (opt.baseline.empty()) throw ConfigError("ladder analysis: no baseline named");
  Ladder l;
  l.names.push_back(opt.baseline);
  l.names.insert(l.names.end(), opt.variants.begin(), opt.variants.end());
  std::map<std::string, size_t> curve_of;
  for (size_t c = 0; c < l.names.size(); ++c)
    if (!curve_of.try_emplace(l.names[c], c).second)
      throw ConfigError(fmt::format("ladder analysis: variant '{}' named twice (or as the baseline too)", l.names[c]));
  std::set<int64_t> seeds;
  std::set<int> rungs;
  for (const auto& o : obs)
    if (curve_of.count(o.variant)) seeds.insert(o.seed), rungs.insert(o.rung);
  l.seeds.assign(seeds.begin(), seeds.end());
  l.rungs.assign(rungs.begin(), rungs.end());
  l.at.resize(l.names.size());
  l.compute.resize(l.names.size());
  for (const auto& o : obs) {
    const auto c = curve_of.find(o.variant);
    if (c == curve_of.end()) continue;
    const auto where = fmt::format("ladder analysis: {} at rung {}, seed {}", o.variant, o.rung, o.seed);
    if (!(o.compute > 0) || !std::isfinite(o.compute))
      throw ConfigError(fmt::format("{}: compute must be a positive number of FLOPs, got {}", where, o.compute));
    if (!std::isfinite(o.loss))
      throw ConfigError(fmt::format("{}: loss must be a finite number, got {}", where, o.loss));
    if (o.step_time && !(*o.step_time > 0 && std::isfinite(*o.step_time)))
      throw ConfigError(fmt::format("{}: step time must be a positive number of seconds, got {}", where, *o.step_time));
    const size_t seed = std::lower_bound(l.seeds.begin(), l.seeds.end(), o.seed) - l.seeds.begin();
    auto& points = l.at[c->second][o.rung];
    for (const auto& p : points)
      if (p.seed == seed) throw ConfigError(fmt::format("{}: observed twice", where));
    points.push_back({seed, o.compute, o.loss, o.step_time});
  }
  for (size_t c = 0; c < l.names.size(); ++c)
    for (const auto& [rung, points] : l.at[c]) {
      double sum = 0;
      for (const auto& p : points) sum += p.compute;
      l.compute[c][rung] = sum / static_cast<double>(points.size());
    }
  return l;
}

enum class ERule { none, zero, shared, free };

struct Rule {
  ERule kind = ERule::none;
  std::string why;
  std::vector<bool> fitted;  // per curve: results at two rungs or more
};

Rule e_rule(const Ladder& l) {
  Rule r;
  size_t fewest = std::numeric_limits<size_t>::max();
  std::string who;
  for (size_t c = 0; c < l.names.size(); ++c) {
    const size_t k = l.at[c].size();
    r.fitted.push_back(k >= 2);
    if (k >= 2 && k < fewest) fewest = k, who = l.names[c];
  }
  if (!r.fitted[0]) {
    r.why =
        fmt::format("the baseline {} has results at {} rung(s): no curve to compare with", l.names[0], l.at[0].size());
    return r;
  }
  r.kind = fewest >= 4 ? ERule::free : fewest == 3 ? ERule::shared : ERule::zero;
  const char* how = r.kind == ERule::free
                        ? "E fitted per variant (4 or more rungs leave residuals after E, A and alpha)"
                    : r.kind == ERule::shared
                        ? "one E shared by every variant, fitted jointly with each one's A and alpha (E, A and alpha "
                          "of one curve would pass through 3 rungs exactly, with nothing left to check them)"
                        : "E = 0, a pure power law (2 rungs fix two parameters and no more)";
  r.why = fmt::format("{} rungs, the fewest of any fitted curve ({}): {}", fewest, who, how);
  return r;
}

const char* rule_name(ERule k) {
  return k == ERule::free ? "free" : k == ERule::shared ? "shared" : k == ERule::zero ? "zero" : "";
}

// Every curve fitted by the rule, each seed counted as often as `weight` says (1 for the
// data; a bootstrap replicate's draw counts).
std::vector<PowerLawFit> fit_ladder(const Ladder& l, const Rule& rule, const std::vector<double>& weight) {
  const size_t n = l.names.size();
  std::vector<CurvePoints> points(n);
  for (size_t c = 0; c < n; ++c)
    for (const auto& [rung, ps] : l.at[c])
      for (const auto& p : ps) points[c].add(p.compute, p.loss, weight[p.seed]);
  std::vector<PowerLawFit> fits(n);
  std::vector<size_t> joint;
  for (size_t c = 0; c < n; ++c) {
    if (!rule.fitted[c] || rule.kind == ERule::none) {
      fits[c].points = points[c].points();
      fits[c].why = rule.fitted[c] ? rule.why : fmt::format("results at {} rung(s): no curve", l.at[c].size());
    } else if (rule.kind == ERule::shared) {
      joint.push_back(c);
    } else {
      fits[c] = fit_power_law(points[c], rule.kind == ERule::zero ? std::optional<double>(0.0) : std::nullopt);
    }
  }
  if (!joint.empty()) {
    std::vector<CurvePoints> curves;
    for (size_t c : joint) curves.push_back(points[c]);
    const auto shared = fit_shared_e(curves);
    for (size_t i = 0; i < joint.size(); ++i) fits[joint[i]] = shared[i];
  }
  return fits;
}

// The baseline's compute to reach the variant's fitted loss at compute C, as the
// multiplier C / that; 0 where the baseline never reaches it (the limit as its
// compute grows without bound).
double multiplier_at(const PowerLaw& base, const PowerLaw& variant, double compute) {
  const auto needed = base.compute_at(variant.loss(compute));
  return needed ? compute / *needed : 0.0;
}

// Curve c's step time over the baseline's at `rung`: exp of the mean log ratio over the
// seeds with both, each counted as often as `weight` says; empty without such a seed (or
// none drawn). `pairs` gets how many seeds have both.
std::optional<double> step_ratio(const Ladder& l, size_t c, int rung, const std::vector<double>& weight,
                                 size_t* pairs = nullptr) {
  const auto base = l.at[0].find(rung), mine = l.at[c].find(rung);
  double sum = 0, total = 0;
  size_t n = 0;
  if (base != l.at[0].end() && mine != l.at[c].end())
    for (const auto& p : mine->second)
      for (const auto& q : base->second)
        if (q.seed == p.seed && p.step_time && q.step_time) {
          ++n;
          sum += weight[p.seed] * std::log(*p.step_time / *q.step_time);
          total += weight[p.seed];
        }
  if (pairs) *pairs = n;
  if (!(total > 0)) return std::nullopt;
  return std::exp(sum / total);
}

// Whether the baseline was measured at `rung`: only there is a variant's multiplier read
// off the baseline's curve within the baseline's own data; elsewhere it is an extrapolation
// of that curve, flagged as one, and the trend is fitted without it.
bool baseline_at(const Ladder& l, int rung) { return l.at[0].count(rung) > 0; }

// What one set of fits says, per variant (index c - 1 for curve c): the multiplier at
// each rung (empty where the variant has no result there), the trend's slope over the
// rungs where the baseline was measured (empty where a multiplier there is 0 or fewer
// than two such rungs have one), and the multiplier at each compute of extrapolate_to.
// Variants without a fit have empty rows.
struct Figures {
  std::vector<std::vector<std::optional<double>>> multiplier;
  std::vector<std::optional<double>> slope;
  std::vector<std::vector<double>> extrapolated;
  std::vector<std::vector<double>> trend_extrapolated;  // exp of the trend's line at each target; empty without a slope
};

Figures figures_of(const Ladder& l, const std::vector<PowerLawFit>& fits, const LadderOptions& opt) {
  Figures f;
  const size_t variants = l.names.size() - 1;
  f.multiplier.resize(variants);
  f.slope.resize(variants);
  f.extrapolated.resize(variants);
  f.trend_extrapolated.resize(variants);
  for (size_t v = 0; v < variants; ++v) {
    const auto& base = fits[0].law;
    const auto& mine = fits[v + 1].law;
    if (!base || !mine) continue;
    std::vector<double> log_c, log_m;
    bool zero = false;
    for (int rung : l.rungs) {
      const auto c = l.compute[v + 1].find(rung);
      if (c == l.compute[v + 1].end()) {
        f.multiplier[v].push_back(std::nullopt);
        continue;
      }
      const double m = multiplier_at(*base, *mine, c->second);
      f.multiplier[v].push_back(m);
      if (!baseline_at(l, rung)) continue;
      zero = zero || m == 0;
      if (m > 0) log_c.push_back(std::log(c->second)), log_m.push_back(std::log(m));
    }
    if (const auto line = fit_line(log_c, log_m); line && !zero) {
      f.slope[v] = line->slope;
      for (const auto& [name, compute] : opt.extrapolate_to)
        f.trend_extrapolated[v].push_back(std::exp(line->intercept + line->slope * std::log(compute)));
    }
    for (const auto& [name, compute] : opt.extrapolate_to)
      f.extrapolated[v].push_back(multiplier_at(*base, *mine, compute));
  }
  return f;
}

// The bootstrap's replicates of every figure, per variant (and rung, or extrapolation).
struct Replicates {
  std::vector<std::vector<std::vector<double>>> multiplier, extrapolated, trend_extrapolated, time_multiplier;
  std::vector<std::vector<double>> slope;
  std::vector<int64_t> slope_left_out;
  int64_t kept = 0, dropped = 0;
  size_t seeds = 0;
};

Replicates bootstrap(const Ladder& l, const Rule& rule, const std::vector<PowerLawFit>& fits,
                     const LadderOptions& opt) {
  const size_t variants = l.names.size() - 1;
  Replicates r;
  r.seeds = l.seeds.size();
  r.multiplier.assign(variants, std::vector<std::vector<double>>(l.rungs.size()));
  r.extrapolated.assign(variants, std::vector<std::vector<double>>(opt.extrapolate_to.size()));
  r.trend_extrapolated = r.extrapolated;
  r.time_multiplier = r.multiplier;
  r.slope.resize(variants);
  r.slope_left_out.assign(variants, 0);
  // A seed's weight is how often the replicate drew it (stats/bootstrap.h).
  resample(l.seeds.size(), opt.bootstrap, opt.rng_seed, [&](const std::vector<double>& weight) {
    const auto refit = fit_ladder(l, rule, weight);
    bool failed = false;
    for (size_t c = 0; c < fits.size(); ++c) failed = failed || (fits[c].law && !refit[c].law);
    if (failed) {
      ++r.dropped;
      return;
    }
    ++r.kept;
    const auto f = figures_of(l, refit, opt);
    for (size_t v = 0; v < variants; ++v) {
      if (!fits[0].law || !fits[v + 1].law) continue;
      for (size_t i = 0; i < l.rungs.size(); ++i) {
        if (!f.multiplier[v][i]) continue;
        r.multiplier[v][i].push_back(*f.multiplier[v][i]);
        if (const auto ratio = step_ratio(l, v + 1, l.rungs[i], weight))
          r.time_multiplier[v][i].push_back(*f.multiplier[v][i] * *ratio);
      }
      for (size_t e = 0; e < opt.extrapolate_to.size(); ++e) r.extrapolated[v][e].push_back(f.extrapolated[v][e]);
      for (size_t e = 0; e < f.trend_extrapolated[v].size(); ++e)
        r.trend_extrapolated[v][e].push_back(f.trend_extrapolated[v][e]);
      if (f.slope[v])
        r.slope[v].push_back(*f.slope[v]);
      else
        ++r.slope_left_out[v];
    }
  });
  return r;
}

// The 95% interval of a figure from its replicates (stats/bootstrap.h: the estimate -/+
// the reach for the seeds in bootstrap standard errors), a multiplier's on the log scale.
// A multiplier some replicate puts at 0 (the baseline never reaching the variant's loss)
// has no log: its interval runs from 0 to the largest replicate. Null without an estimate
// or with fewer than two replicates.
json bootstrap_ci(const std::optional<Replicates>& reps, const std::vector<double>& xs, std::optional<double> estimate,
                  bool multiplier) {
  if (!reps || !estimate || xs.size() < 2) return nullptr;
  if (multiplier && std::any_of(xs.begin(), xs.end(), [](double x) { return !(x > 0); }))
    return json::array({0.0, *std::max_element(xs.begin(), xs.end())});
  const auto ci =
      bootstrap_interval(xs, *estimate, reps->seeds, multiplier ? IntervalScale::kLog : IntervalScale::kLinear);
  return json::array({ci->first, ci->second});
}

// What a fitted curve had left to check it: its distinct computes (rungs) against the
// parameters fitted to them. Seeds at one compute measure the noise there, not the
// curve's shape, so a curve through as many computes as it has parameters passes
// through their means exactly (E = 0 through 2 rungs: rmse 1e-12 with one seed) and
// nothing in the data tests it. A shared E is one fit of every curve in it: their
// computes against 2 per curve plus the one E.
struct Freedom {
  size_t computes = 0, parameters = 0;
  std::string of;
  bool residual() const { return computes > parameters; }
};

Freedom freedom_of(const Ladder& l, const Rule& rule, size_t c) {
  Freedom f{l.at[c].size(), rule.kind == ERule::free ? 3u : 2u, "this curve"};
  if (rule.kind != ERule::shared) return f;
  f.computes = 0, f.parameters = 1;
  size_t curves = 0;
  for (size_t k = 0; k < l.names.size(); ++k)
    if (rule.fitted[k]) f.computes += l.at[k].size(), f.parameters += 2, ++curves;
  f.of = fmt::format("the joint fit of {} curves with one E", curves);
  return f;
}

json fits_json(const Ladder& l, const Rule& rule, const std::vector<PowerLawFit>& fits) {
  json out = json::object();
  for (size_t c = 0; c < l.names.size(); ++c) {
    const auto& f = fits[c];
    const auto points = std::llround(f.points);
    if (!f.law) {
      out[l.names[c]] = {{"points", points}, {"why", f.why}};
      continue;
    }
    const auto fr = freedom_of(l, rule, c);
    out[l.names[c]] = {{"E", f.law->E},
                       {"A", f.law->A},
                       {"alpha", f.law->alpha},
                       {"points", points},
                       {"rmse", f.rmse()},
                       {"computes", fr.computes},
                       {"parameters", fr.parameters},
                       {"parameters_of", fr.of},
                       {"residual_freedom", fr.residual()}};
  }
  return out;
}

// Each curve's Huber fit on all its points (stats/huber_fit.h), beside the least-squares one.
json huber_json(const Ladder& l, const LadderOptions& opt) {
  json out = json::object();
  for (size_t c = 0; c < l.names.size(); ++c) {
    std::vector<HuberPoint> pts;
    for (const auto& [rung, ps] : l.at[c])
      for (const auto& p : ps) pts.push_back({p.compute, p.loss});
    if (!opt.huber) {
      out[l.names[c]] = {{"points", pts.size()}, {"why", "not asked for"}};
      continue;
    }
    const auto f = fit_huber_power_law(pts);
    if (!f.law) {
      out[l.names[c]] = {{"points", f.points}, {"why", f.why}};
      continue;
    }
    out[l.names[c]] = {{"E", f.law->E},          {"A", f.law->A},         {"alpha", f.law->alpha},
                       {"points", f.points},     {"objective", f.objective}, {"e_cap", f.e_cap},
                       {"e_capped", f.e_capped}, {"starts", f.starts}};
  }
  return out;
}

constexpr const char* kWhichFit =
    "the least-squares fits (\"fits\", by the E rule): closed-form in E and A with no starting point, so that every "
    "bootstrap replicate refits the same way, and an E rule that counts rungs so that no curve is fitted with more "
    "parameters than its rungs can check; the Huber fits (\"huber_fits\": Chinchilla's Approach 3, Huber loss "
    "delta 1e-3 on log residuals by L-BFGS from a grid of starts, E at most the lowest observed loss, 5 points or "
    "more) are the field's way, shown as a check: where the two disagree, the data do not pin the curve down";

// Why curve c has no multiplier at `compute` from these fits.
std::string no_multiplier(const Ladder& l, size_t c, const std::vector<PowerLawFit>& fits, double compute) {
  if (!fits[0].law) return fmt::format("no curve for the baseline {}: {}", l.names[0], fits[0].why);
  if (!fits[c].law) return fmt::format("no curve for {}: {}", l.names[c], fits[c].why);
  return fmt::format("{}'s fitted loss there, {:.6g}, is at or below {}'s E, {:.6g}: the baseline never reaches it",
                     l.names[c], fits[c].law->loss(compute), l.names[0], fits[0].law->E);
}

// How far `compute` lies outside [low, high], in decades: past the largest for one above,
// short of the smallest for one below; 0 within.
double decades_outside(double compute, double low, double high) {
  if (compute > high) return std::log10(compute / high);
  if (compute < low) return std::log10(low / compute);
  return 0.0;
}

// Why a multiplier read `decades` past `what` ("the ladder", the baseline's rungs) is not given.
std::string too_far(double decades, const LadderOptions& opt, const std::string& what = "the ladder") {
  return fmt::format("{:.1f} decades past {}, beyond the {:g} decade{} its data are taken to carry{}", decades, what,
                     opt.extrapolate_decades, opt.extrapolate_decades == 1 ? "" : "s",
                     opt.extrapolate_decades_asked ? " (ladder.extrapolate_decades)"
                                                   : " by default (ladder.extrapolate_decades asks for more)");
}

// Whether a multiplier `decades` past the data lies beyond what they are taken to carry.
bool carried_too_far(double decades, const LadderOptions& opt) {
  return decades > opt.extrapolate_decades * (1 + 1e-12);
}

// Where the baseline has no result at a variant's rung, the multiplier there reads the
// baseline's curve away from its data: an extrapolation, flagged as the targets' are and
// carried no further than they are (left out of the trend: figures_of).
void flag_unmeasured_rung(json& j, const Ladder& l, size_t c, int rung, const LadderOptions& opt) {
  j["extrapolation"] = !baseline_at(l, rung);
  if (baseline_at(l, rung)) return;
  double low = std::numeric_limits<double>::infinity(), high = 0;
  for (const auto& [r, compute] : l.compute[0]) low = std::min(low, compute), high = std::max(high, compute);
  const double compute = l.compute[c].at(rung);
  const double decades = l.compute[0].empty() ? 0.0 : decades_outside(compute, low, high);
  j["decades_past_baseline"] = decades;
  const auto missing = fmt::format("{} has no result at this rung", l.names[0]);
  if (j["multiplier"].is_number() && carried_too_far(decades, opt)) {
    j["multiplier"] = nullptr;
    j["multiplier_ci95"] = nullptr;
    j["why"] = fmt::format("{}: its curve would be read {}", missing, too_far(decades, opt, "its rungs"));
  } else if (j["multiplier"].is_number()) {
    const auto where =
        decades > 0 ? fmt::format("{:.1f} decades past its rungs", decades) : std::string("between its rungs");
    j["extrapolation_why"] = fmt::format("{}: the multiplier reads its curve {}", missing, where);
  }
}

// A variant at one rung: what was observed there, paired with the baseline by seed, and
// what the fits say.
json rung_variant(const Ladder& l, size_t c, size_t ri, const std::vector<PowerLawFit>& fits, const Figures& f,
                  const std::optional<Replicates>& reps, const LadderOptions& opt) {
  const int rung = l.rungs[ri];
  const auto& mine = l.at[c].at(rung);
  const double compute = l.compute[c].at(rung);
  std::vector<double> diffs;
  double sum = 0;
  for (const auto& p : mine) {
    sum += p.loss;
    const auto base = l.at[0].find(rung);
    if (base == l.at[0].end()) continue;
    for (const auto& q : base->second)
      if (q.seed == p.seed) diffs.push_back(p.loss - q.loss);
  }
  const auto d = paired_stats(diffs);
  json j = {{"compute", compute},
            {"loss", sum / static_cast<double>(mine.size())},
            {"fitted_loss", fits[c].law ? json(fits[c].law->loss(compute)) : json(nullptr)},
            {"n", mine.size()},
            {"pairs", d.n},
            {"difference", d.n > 0 ? json(d.mean) : json(nullptr)},
            {"difference_ci95", d.ci_low ? json::array({*d.ci_low, *d.ci_high}) : json(nullptr)},
            {"difference_p", d.p ? json(*d.p) : json(nullptr)},
            {"multiplier", nullptr},
            {"multiplier_ci95", nullptr}};
  const auto& m = f.multiplier[c - 1];
  if (!m.empty() && m[ri] && *m[ri] > 0) j["multiplier"] = *m[ri];
  if (!m.empty() && m[ri] && *m[ri] > 0)
    j["multiplier_ci95"] = bootstrap_ci(reps, reps ? reps->multiplier[c - 1][ri] : std::vector<double>{}, m[ri], true);
  if (j["multiplier"].is_null()) j["why"] = no_multiplier(l, c, fits, compute);
  flag_unmeasured_rung(j, l, c, rung, opt);
  size_t pairs = 0;
  const auto ratio = step_ratio(l, c, rung, std::vector<double>(l.seeds.size(), 1.0), &pairs);
  j["step_time_ratio"] = ratio ? json(*ratio) : json(nullptr);
  j["step_time_pairs"] = pairs;
  j["time_multiplier"] = nullptr;
  j["time_multiplier_ci95"] = nullptr;
  if (ratio && j["multiplier"].is_number()) {
    const double t = j["multiplier"].get<double>() * *ratio;
    j["time_multiplier"] = t;
    j["time_multiplier_ci95"] =
        bootstrap_ci(reps, reps ? reps->time_multiplier[c - 1][ri] : std::vector<double>{}, t, true);
  } else {
    j["time_why"] = !ratio ? "no seed with a step time logged for both the variant and the baseline here"
                           : "no compute multiplier here";
  }
  return j;
}

json rungs_json(const Ladder& l, const std::vector<PowerLawFit>& fits, const Figures& f,
                const std::optional<Replicates>& reps, const LadderOptions& opt) {
  json out = json::array();
  for (size_t ri = 0; ri < l.rungs.size(); ++ri) {
    const int rung = l.rungs[ri];
    json r = {{"rung", rung}, {"baseline", nullptr}, {"variants", json::object()}};
    if (const auto b = l.at[0].find(rung); b != l.at[0].end()) {
      std::vector<double> losses;
      for (const auto& p : b->second) losses.push_back(p.loss);
      const auto spread = paired_stats(losses);  // its mean and sample sd; the t-test is not used
      r["baseline"] = {{"compute", l.compute[0].at(rung)},
                       {"loss", spread.mean},
                       {"n", b->second.size()},
                       {"sd", spread.sd ? json(*spread.sd) : json(nullptr)}};
    }
    std::vector<json*> family;  // the variants' tests at this rung: Holm-adjusted together
    for (size_t c = 1; c < l.names.size(); ++c)
      if (l.at[c].count(rung))
        family.push_back(&(r["variants"][l.names[c]] = rung_variant(l, c, ri, fits, f, reps, opt)));
    holm_across(family, "difference_p");
    out.push_back(r);
  }
  return out;
}

json trend_json(const Ladder& l, const std::vector<PowerLawFit>& fits, const Figures& f,
                const std::optional<Replicates>& reps) {
  json out = json::object();
  for (size_t c = 1; c < l.names.size(); ++c) {
    const auto& slope = f.slope[c - 1];
    const auto& m = f.multiplier[c - 1];
    json unmeasured = json::array();  // rungs with a multiplier the trend leaves out
    for (size_t ri = 0; ri < m.size(); ++ri)
      if (m[ri] && !baseline_at(l, l.rungs[ri])) unmeasured.push_back(l.rungs[ri]);
    if (slope) {
      out[l.names[c]] = {{"slope", *slope},
                         {"ci95", bootstrap_ci(reps, reps ? reps->slope[c - 1] : std::vector<double>{}, slope, false)},
                         {"left_out", reps ? reps->slope_left_out[c - 1] : 0}};
    } else {
      std::string why = fmt::format("fewer than two rungs with a multiplier where {} was measured", l.names[0]);
      if (!fits[0].law || !fits[c].law) why = no_multiplier(l, c, fits, 0.0);
      for (size_t ri = 0; ri < m.size(); ++ri)
        if (m[ri] == 0.0 && baseline_at(l, l.rungs[ri]))
          why = fmt::format("at rung {} the baseline never reaches {}'s loss (multiplier 0): log 0 has no slope",
                            l.rungs[ri], l.names[c]);
      out[l.names[c]] = {{"slope", nullptr}, {"ci95", nullptr}, {"why", why}};
    }
    if (!unmeasured.empty()) {
      out[l.names[c]]["rungs_without_baseline"] = unmeasured;
      out[l.names[c]]["rungs_why"] = fmt::format(
          "left out of the trend: {} has no result at rung(s) {}, where a multiplier reads its curve away from its "
          "data",
          l.names[0], unmeasured.dump());
    }
  }
  return out;
}

json extrapolation_json(const Ladder& l, const Rule& rule, const std::vector<PowerLawFit>& fits, const Figures& f,
                        const std::optional<Replicates>& reps, const LadderOptions& opt) {
  json out = json::object();
  for (size_t c = 1; c < l.names.size(); ++c) {
    double low = std::numeric_limits<double>::infinity(), high = 0;
    for (const auto& [rung, compute] : l.compute[c]) low = std::min(low, compute), high = std::max(high, compute);
    // A value read off two curves is checked by the data only where both fits had freedom left.
    const bool fitted = fits[0].law && fits[c].law;
    const bool freedom = fitted && freedom_of(l, rule, 0).residual() && freedom_of(l, rule, c).residual();
    json list = json::array();
    for (size_t e = 0; e < opt.extrapolate_to.size(); ++e) {
      const auto& [name, compute] = opt.extrapolate_to[e];
      const bool beyond = compute < low * (1 - 1e-12) || compute > high * (1 + 1e-12);
      const double decades = l.compute[c].empty() || !beyond ? 0.0 : decades_outside(compute, low, high);
      json x = {{"name", name},
                {"compute", compute},
                {"multiplier", nullptr},
                {"ci95", nullptr},
                {"trend_multiplier", nullptr},
                {"trend_ci95", nullptr},
                {"extrapolation", beyond},
                {"decades_past_ladder", decades},
                {"residual_freedom", fitted ? json(freedom) : json(nullptr)}};
      // Past the decades the data carry, no number: a curve fitted over one or two decades says
      // nothing checked about nine more, and a number printed there reads as a finding.
      if (carried_too_far(decades, opt)) {
        x["why"] = too_far(decades, opt);
        x["trend_why"] = x["why"];
        list.push_back(x);
        continue;
      }
      const auto& m = f.extrapolated[c - 1];
      if (!m.empty() && m[e] > 0) {
        x["multiplier"] = m[e];
        x["ci95"] = bootstrap_ci(reps, reps ? reps->extrapolated[c - 1][e] : std::vector<double>{}, m[e], true);
      }
      if (x["multiplier"].is_null()) x["why"] = no_multiplier(l, c, fits, compute);
      const auto& t = f.trend_extrapolated[c - 1];
      if (!t.empty()) {
        x["trend_multiplier"] = t[e];
        x["trend_ci95"] =
            bootstrap_ci(reps, reps ? reps->trend_extrapolated[c - 1][e] : std::vector<double>{}, t[e], true);
      } else {
        x["trend_why"] = "no trend (see \"trend\")";
      }
      list.push_back(x);
    }
    out[l.names[c]] = list;
  }
  return out;
}

json bootstrap_json(const Ladder& l, const Rule& rule, const std::optional<Replicates>& reps,
                    const LadderOptions& opt) {
  if (l.seeds.empty()) return {{"none", "no finished point: no interval"}};
  if (l.seeds.size() < 2) return {{"none", "one seed: no interval"}};
  if (rule.kind == ERule::none) return {{"none", "no fit: no interval"}};
  if (!reps) return {{"none", fmt::format("{} bootstrap replicates asked for: no interval", opt.bootstrap)}};
  json j = {{"replicates", opt.bootstrap},
            {"kept", reps->kept},
            {"dropped", reps->dropped},
            {"rng_seed", opt.rng_seed},
            {"method",
             "paired bootstrap over seeds: each replicate draws as many seeds with replacement, a seed "
             "bringing all its rungs for every variant; every curve refitted by the same E rule; 95% interval: the "
             "estimate -/+ t(0.975, seeds - 1) sqrt(seeds / (seeds - 1)) bootstrap standard errors, a multiplier's "
             "on the log scale; a replicate whose fit fails is dropped; one where the baseline never reaches a "
             "variant's loss counts that multiplier as 0, and the interval then runs from 0"},
            {"reach", bootstrap_reach(reps->seeds)}};
  if (reps->dropped * 20 > opt.bootstrap)
    j["warning"] = fmt::format(
        "{} of {} replicates dropped (a fit failed): the intervals describe the resamples the curves could be fitted "
        "to",
        reps->dropped, opt.bootstrap);
  return j;
}

}  // namespace

json ladder_analysis(const std::vector<LadderObservation>& obs, const LadderOptions& opt) {
  const auto l = index_ladder(obs, opt);
  const auto rule = e_rule(l);
  const auto fits = fit_ladder(l, rule, std::vector<double>(l.seeds.size(), 1.0));
  const auto figures = figures_of(l, fits, opt);
  std::optional<Replicates> reps;
  if (l.seeds.size() >= 2 && rule.kind != ERule::none && opt.bootstrap > 0) reps = bootstrap(l, rule, fits, opt);
  return {{"baseline", opt.baseline},
          {"e_rule", rule.kind == ERule::none ? json(nullptr) : json(rule_name(rule.kind))},
          {"e_rule_why", rule.why},
          {"seeds", l.seeds.size()},
          {"bootstrap", bootstrap_json(l, rule, reps, opt)},
          {"fits", fits_json(l, rule, fits)},
          {"huber_fits", huber_json(l, opt)},
          {"multipliers_from", kWhichFit},
          {"rungs", rungs_json(l, fits, figures, reps, opt)},
          {"trend", trend_json(l, fits, figures, reps)},
          {"extrapolate_decades", opt.extrapolate_decades},
          {"extrapolation", extrapolation_json(l, rule, fits, figures, reps, opt)}};
}

}  // namespace xsagpt
