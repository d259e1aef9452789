// The ladder's tables, as text and as markdown (see ladder_report.h).
#include "sweep/ladder_report.h"

#include "sweep/lr_sensitivity.h"
#include "sweep/text_table.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <vector>

namespace xsagpt {

namespace {

struct LadderReport {
  std::vector<std::string> lines;  // sentences before the tables
  std::vector<std::pair<std::string, TextTable>> tables;
  std::vector<std::string> notes;
};

// j[k], or null where j is no object or lacks k: the analysis leaves out what it cannot compute.
const json& field(const json& j, const std::string& k) {
  static const json none;
  return j.is_object() && j.contains(k) ? j[k] : none;
}

bool has_number(const json& j, const char* k) { return field(j, k).is_number(); }

std::string text_of(const json& j, const char* k) {
  return field(j, k).is_string() ? field(j, k).get<std::string>() : "";
}

std::string loss_cell(const json& j) {
  if (!has_number(j, "loss")) return "-";
  return fmt::format("{} (n={})", bounded_fixed(j["loss"].get<double>(), 4),
                     field(j, "n").is_number() ? field(j, "n").get<int64_t>() : 0);
}

// An interval's text: " [lo, hi]" with each end as `cell` writes it; "" without one.
template <class Cell>
std::string ci_text(const json& ci, Cell cell) {
  if (!ci.is_array() || ci.size() != 2 || !ci[0].is_number() || !ci[1].is_number()) return "";
  return fmt::format(" [{}, {}]", cell(ci[0].get<double>()), cell(ci[1].get<double>()));
}

std::string signed4(double x) { return bounded_fixed(x, 4, true); }

// The paired difference, its interval, and its p beside p Holm-adjusted across the rung's variants.
std::string difference_cell(const json& v) {
  if (!has_number(v, "difference")) return "-";
  const auto ci = ci_text(field(v, "difference_ci95"), signed4);
  const auto p = has_number(v, "difference_p") && has_number(v, "difference_p_holm")
                     ? fmt::format("; p {:.3g}, Holm {:.3g}", v["difference_p"].get<double>(),
                                   v["difference_p_holm"].get<double>())
                     : "";
  return fmt::format("{}{}{}", bounded_fixed(v["difference"].get<double>(), 4, true),
                     ci.empty() ? " (no interval)" : ci, p);
}

// The baseline's own seed-to-seed spread at a rung, from 3 seeds: the noise floor beside the differences.
std::string noise_floor_cell(const json& baseline) {
  if (!has_number(baseline, "sd") || !has_number(baseline, "n") || baseline["n"].get<int64_t>() < 3)
    return "- (under 3 seeds)";
  return bounded_fixed(baseline["sd"].get<double>(), 4);
}

// The largest Holm family of any rung: how many variants its p-values were adjusted across.
int64_t holm_family(const json& a) {
  int64_t m = 0;
  if (!field(a, "rungs").is_array()) return m;
  for (const auto& r : a["rungs"]) {
    const json& variants = field(r, "variants");
    if (!variants.is_object()) continue;
    for (const auto& x : variants)
      if (has_number(x, "holm_m")) m = std::max(m, x["holm_m"].get<int64_t>());
  }
  return m;
}

// A multiplier and its interval: three decimals, or three significant digits for one far
// from 1 (an extrapolation can reach 1e8), where decimals would only add width.
// An extrapolated one (`guess`) is flagged "x?": a projection, never a measurement.
std::string multiplier_cell(const json& m, const char* key, const char* ci_key, bool guess = false) {
  if (!has_number(m, key)) return "-";
  const double x = m[key].get<double>();
  const json& ci = field(m, ci_key);
  const bool far = x >= 100 || (ci.is_array() && ci.size() == 2 && ci[1].is_number() && ci[1].get<double>() >= 100);
  auto cell = [far](double y) { return far ? fmt::format("{:.3g}", y) : fmt::format("{:.3f}", y); };
  const auto text = ci_text(ci, cell);
  return fmt::format("{}x{}{}", cell(x), guess ? "?" : "", text.empty() ? " (no interval)" : text);
}

// The variants besides the baseline, in the sweep's order.
std::vector<std::string> variants_of(const json& summary) {
  std::vector<std::string> out;
  for (const auto& v : summary["variants"])
    if (v != summary["baseline"]) out.push_back(v.get<std::string>());
  return out;
}

// The table of rungs: sizes and budgets, the baseline's loss, each variant's loss, difference and multiplier.
TextTable ladder_rung_table(const json& ladder, const std::string& b, const std::vector<std::string>& vs,
                            std::vector<std::string>& notes) {
  TextTable t{"", {"rung", "params", "tokens", "FLOPs", b + " loss", b + " sd (noise floor)"}, {}};
  for (const auto& v : vs)
    for (const auto& h :
         {v + " loss", v + " - " + b + " [95% CI]; p, Holm", v + " multiplier [95% CI]", v + " in time [95% CI]"})
      t.head.push_back(h);
  const json& a = ladder["analysis"];
  for (size_t i = 0; i < ladder["rungs"].size(); ++i) {
    const auto& r = ladder["rungs"][i];
    json row_fit;
    if (a.contains("rungs"))
      for (const auto& x : a["rungs"])
        if (field(x, "rung") == json(i)) row_fit = x;
    const std::string name = r["name"].get<std::string>();
    TableRow row{name,
                 fmt::format("{:.3g}", r["params"].get<double>()),
                 fmt::format("{:.3g}", r["tokens"].get<double>()),
                 fmt::format("{:.3g}", r["flops"].get<double>()),
                 loss_cell(field(row_fit, "baseline")),
                 noise_floor_cell(field(row_fit, "baseline"))};
    for (const auto& v : vs) {
      const json& cell = field(field(row_fit, "variants"), v);
      row.push_back(loss_cell(cell));
      row.push_back(difference_cell(cell));
      // Where the baseline has no result at the rung, the multiplier extrapolates its curve: "x?".
      const bool guess = field(cell, "extrapolation") == json(true);
      row.push_back(multiplier_cell(cell, "multiplier", "multiplier_ci95", guess));
      row.push_back(multiplier_cell(cell, "time_multiplier", "time_multiplier_ci95"));
      if (!text_of(cell, "why").empty())
        notes.push_back(fmt::format("{} at {}: no multiplier: {}", v, name, text_of(cell, "why")));
      if (!text_of(cell, "extrapolation_why").empty())
        notes.push_back(fmt::format("{} at {}: extrapolated (x?): {}", v, name, text_of(cell, "extrapolation_why")));
    }
    t.rows.push_back(row);
  }
  return t;
}

// With several data ratios: each variant's multiplier per rung at every ratio, each from
// that ratio's own fit across rungs (summary.json's ladder.ratios); a note per variant
// for the rungs whose surface gives no multiplier, with the first one's reason.
TextTable ladder_ratio_table(const json& ladder, const std::vector<std::string>& vs, std::vector<std::string>& notes) {
  std::map<std::string, std::pair<std::vector<std::string>, std::string>> missing;  // variant -> rungs, first why
  TextTable t{"", {"rung"}, {}};
  for (const auto& v : vs) {
    for (const auto& r : ladder["ratios"])
      t.head.push_back(fmt::format("{} at {:g} tok/param", v, r["ratio"].get<double>()));
    t.head.push_back(v + " at the optimal ratio");
  }
  const json& budgets = field(field(ladder, "surface"), "budgets");
  for (size_t i = 0; i < ladder["rungs"].size(); ++i) {
    const auto name = ladder["rungs"][i]["name"].get<std::string>();
    TableRow row{name};
    for (const auto& v : vs) {
      for (const auto& r : ladder["ratios"]) {
        json cell;
        for (const auto& x : field(field(r, "analysis"), "rungs"))
          if (field(x, "rung") == json(i)) cell = field(field(x, "variants"), v);
        row.push_back(multiplier_cell(cell, "multiplier", "multiplier_ci95"));
      }
      json at;
      for (const auto& b : budgets.is_array() ? budgets : json::array())
        if (field(b, "name") == json(name)) at = field(field(b, "variants"), v);
      row.push_back(
          has_number(at, "multiplier")
              ? fmt::format("{:.3f}x at {:.3g} tok/param", at["multiplier"].get<double>(), at["ratio"].get<double>())
              : "-");
      if (!has_number(at, "multiplier") && !text_of(at, "why").empty()) {
        auto& [rungs, why] = missing[v];
        if (rungs.empty()) why = text_of(at, "why");
        rungs.push_back(name);
      }
    }
    t.rows.push_back(row);
  }
  for (const auto& v : vs)
    if (const auto it = missing.find(v); it != missing.end())
      notes.push_back(fmt::format("{} at the optimal ratio: no multiplier at {} ({}: {})", v,
                                  fmt::join(it->second.first, ", "), it->second.first.front(), it->second.second));
  return t;
}

// The loss surface of each variant (summary.json's ladder.surface.fits).
TextTable ladder_surface_table(const json& surface) {
  TextTable t{"", {"variant", "E", "A", "alpha", "B", "beta", "points", "Huber objective"}, {}};
  for (const auto& [v, f] : field(surface, "fits").items()) {
    if (!has_number(f, "alpha")) {
      t.rows.push_back({v, "-", "-", "-", "-", "-", field(f, "points").dump() + ": " + text_of(f, "why"), "-"});
      continue;
    }
    t.rows.push_back({v, bounded_fixed(f["E"].get<double>(), 4) + (f.value("e_capped", false) ? " (capped)" : ""),
                      fmt::format("{:.4g}", f["A"].get<double>()), bounded_fixed(f["alpha"].get<double>(), 4),
                      fmt::format("{:.4g}", f["B"].get<double>()), bounded_fixed(f["beta"].get<double>(), 4),
                      field(f, "points").dump(), fmt::format("{:.3g}", f["objective"].get<double>())});
  }
  return t;
}

// The fit's computes over its parameters: "2 - 2 = 0 (exact)"; the joint fit's for a shared E.
std::string freedom_cell(const json& f) {
  if (!has_number(f, "computes") || !has_number(f, "parameters")) return "-";
  const auto n = f["computes"].get<int64_t>(), k = f["parameters"].get<int64_t>();
  return fmt::format("{} - {} = {}{}{}", n, k, n - k, n > k ? "" : " (exact)",
                     text_of(f, "parameters_of") == "this curve" ? "" : " (" + text_of(f, "parameters_of") + ")");
}

TextTable ladder_fit_table(const json& a) {
  TextTable t{"", {"variant", "E", "A", "alpha", "rmse", "points", "rungs - parameters"}, {}};
  if (!field(a, "fits").is_object()) return t;
  for (const auto& [v, f] : a["fits"].items()) {
    if (!has_number(f, "alpha")) {
      t.rows.push_back({v, "-", "-", "-", "-", field(f, "points").dump() + ": " + text_of(f, "why"), "-"});
      continue;
    }
    t.rows.push_back({v, bounded_fixed(f["E"].get<double>(), 4), fmt::format("{:.4g}", f["A"].get<double>()),
                      bounded_fixed(f["alpha"].get<double>(), 4),
                      has_number(f, "rmse") ? bounded_fixed(f["rmse"].get<double>(), 4) : "-",
                      field(f, "points").dump(), freedom_cell(f)});
  }
  return t;
}

// The Huber fits (stats/huber_fit.h) beside the least-squares ones: E, A, alpha, whether E was held at the
// lowest observed loss, and the objective.
TextTable ladder_huber_table(const json& a) {
  TextTable t{"", {"variant", "E", "A", "alpha", "E held at the lowest loss", "Huber objective", "points"}, {}};
  if (!field(a, "huber_fits").is_object()) return t;
  for (const auto& [v, f] : a["huber_fits"].items()) {
    if (!has_number(f, "alpha")) {
      t.rows.push_back({v, "-", "-", "-", "-", "-", field(f, "points").dump() + ": " + text_of(f, "why")});
      continue;
    }
    t.rows.push_back({v, bounded_fixed(f["E"].get<double>(), 4), fmt::format("{:.4g}", f["A"].get<double>()),
                      bounded_fixed(f["alpha"].get<double>(), 4),
                      field(f, "e_capped") == json(true)
                          ? fmt::format("yes ({})", has_number(f, "e_cap") ? bounded_fixed(f["e_cap"].get<double>(), 4)
                                                                           : "?")
                          : "no",
                      has_number(f, "objective") ? fmt::format("{:.3g}", f["objective"].get<double>()) : "-",
                      field(f, "points").dump()});
  }
  return t;
}

// Beside an extrapolated multiplier, how far it reaches and whether anything checked the
// curves it is read from: "; 10.6 decades past the ladder, exact fits (no residual freedom)".
std::string extrapolation_words(const json& target) {
  const bool any = has_number(target, "multiplier") || has_number(target, "trend_multiplier");
  if (!any || field(target, "extrapolation") != json(true)) return "";
  std::string out;
  if (has_number(target, "decades_past_ladder"))
    out = fmt::format("; {:.1f} decades past the ladder", target["decades_past_ladder"].get<double>());
  const json& freedom = field(target, "residual_freedom");
  if (freedom.is_boolean())
    out += freedom.get<bool>() ? ", fits with residual freedom" : ", exact fits (no residual freedom)";
  return out;
}

// Per variant the trend of the multiplier with compute, and the multiplier at each extrapolation target.
TextTable ladder_trend_table(const json& a, const std::vector<std::string>& vs, std::vector<std::string>& notes) {
  TextTable t{"", {"variant", "trend: slope of log multiplier vs log compute [95% CI]"}, {}};
  const json& ex = field(a, "extrapolation");
  if (!vs.empty() && field(ex, vs.front()).is_array())
    for (const auto& target : ex[vs.front()])
      t.head.push_back(fmt::format(
          "{} at {} FLOPs: curves; trend (extrapolation)", text_of(target, "name"),
          has_number(target, "compute") ? fmt::format("{:.3g}", target["compute"].get<double>()) : "?"));
  for (const auto& v : vs) {
    const json& tr = field(field(a, "trend"), v);
    TableRow row{v, has_number(tr, "slope")
                        ? signed4(tr["slope"].get<double>()) + ci_text(field(tr, "ci95"), signed4)
                        : "-"};
    if (!text_of(tr, "why").empty()) notes.push_back(fmt::format("{}: no trend: {}", v, text_of(tr, "why")));
    if (!text_of(tr, "rungs_why").empty()) notes.push_back(fmt::format("{}: trend: {}", v, text_of(tr, "rungs_why")));
    if (field(ex, v).is_array())
      for (const auto& target : ex[v]) {
        const bool guess = field(target, "extrapolation") == json(true);
        const auto curves = multiplier_cell(target, "multiplier", "ci95", guess);
        const auto trend = multiplier_cell(target, "trend_multiplier", "trend_ci95", guess);
        row.push_back(curves == "-" && trend == "-" ? "-"
                                                    : fmt::format("{}; trend {}{}", curves, trend,
                                                                  extrapolation_words(target)));
        if (!text_of(target, "why").empty())
          notes.push_back(fmt::format("{} at {}: {}", v, text_of(target, "name"), text_of(target, "why")));
        else if (!text_of(target, "trend_why").empty())
          notes.push_back(
              fmt::format("{} at {}: no trend extrapolation: {}", v, text_of(target, "name"), text_of(target, "trend_why")));
      }
    t.rows.push_back(row);
  }
  return t;
}

// With rate multipliers: per variant and rung the rate it is judged at; with tune_rungs,
// the larger rungs' rate is the variant's tuned one, marked "tuned" (or "waits"), and a
// note says where it came from.
TextTable ladder_rate_table(const json& ladder, std::vector<std::string>& notes) {
  TextTable t{"", {"variant"}, {}};
  for (const auto& r : ladder["rungs"]) t.head.push_back(r["name"].get<std::string>());
  const json& tuning = field(ladder, "tuning");
  for (const auto& [v, choices] : ladder["lr_choice"].items()) {
    TableRow row{v};
    for (const auto& r : ladder["rungs"]) {
      const auto it =
          std::find_if(choices.begin(), choices.end(), [&](const json& c) { return c["rung"] == r["name"]; });
      if (it == choices.end()) {
        row.push_back(field(tuning, v).is_object() ? "waits for tuning" : "-");
        continue;
      }
      const json& c = *it;
      const bool edge = field(c, "at_edge") == json(true), tuned = !text_of(c, "origin").empty();
      row.push_back(fmt::format("{:.3g} (x{:g}{}){}", c["lr"].get<double>(), c["lr_mult"].get<double>(),
                                tuned ? ", tuned" : "", edge ? " *" : ""));
      if (edge && !tuned)
        notes.push_back(
            fmt::format("{} at {}: its best rate is at the edge of the multipliers swept; its optimum may "
                        "lie beyond them",
                        v, c["rung"].get<std::string>()));
    }
    if (field(tuning, v).is_object()) {
      const auto& tv = tuning[v];
      notes.push_back(fmt::format("{}: the larger rungs' rate {}{}{}", v, text_of(tv, "origin"),
                                  tv["at_edge"] == json(true)
                                      ? "; at the edge of the multipliers tried, so its optimum "
                                        "may lie beyond them"
                                      : "",
                                  tv["carried_by"] == json("rate rule")
                                      ? "; under model.parametrization \"mup\" the tuned rate would carry by μP"
                                      : ""));
    }
    t.rows.push_back(row);
  }
  return t;
}

void add_left_out(const json& ladder, std::vector<std::string>& notes) {
  for (const auto& x : ladder["left_out"])
    notes.push_back(
        fmt::format("{} left out of the fit: {}", x["point"].get<std::string>(), x["why"].get<std::string>()));
}

LadderReport build_ladder_report(const json& summary) {
  LadderReport rep;
  const json& ladder = summary["ladder"];
  const json& a = ladder["analysis"];
  const auto b = summary["baseline"].get<std::string>();
  const auto& rules = ladder["rules"];
  rep.lines.push_back(fmt::format("Rules: {}; {}; {}; {}.", rules["size"].get<std::string>(),
                                  rules["tokens"].get<std::string>(), rules["lr"].get<std::string>(),
                                  rules["schedule"].get<std::string>()));
  if (!text_of(a, "error").empty()) {
    rep.lines.push_back("No fit: " + text_of(a, "error"));
    return rep;
  }
  const auto vs = variants_of(summary);
  if (ladder.contains("ratios")) {
    std::vector<double> ratios;
    for (const auto& x : ladder["ratios"]) ratios.push_back(x["ratio"].get<double>());
    rep.lines.push_back(
        fmt::format("Data ratios: {:g} tokens per parameter, each shorter one branched off the "
                    "longest's runs; the table of rungs and the fits below are the longest ratio's ({:g}).",
                    fmt::join(ratios, ", "), ratios.back()));
    rep.tables.emplace_back(
        "Multiplier at each data ratio (each ratio's own fit across rungs), and at the "
        "compute-optimal ratio for the rung's longest run's budget (each variant's surface)",
        ladder_ratio_table(ladder, vs, rep.notes));
    if (ladder.contains("surface"))
      rep.tables.emplace_back(
          "Loss surfaces across ratios, L(N, D) = E + A N^-alpha + B D^-beta (Chinchilla's "
          "form; Huber loss of log residuals, L-BFGS from a grid of starts; no interval)",
          ladder_surface_table(ladder["surface"]));
  }
  rep.tables.emplace_back("", ladder_rung_table(ladder, b, vs, rep.notes));
  if (field(a, "seeds") == json(0)) {  // words, not a fit table of dashes and "Seeds: 0"
    rep.lines.push_back("No point of the ladder finished with a usable result: nothing to fit or compare (each point "
                        "left out is named below).");
    add_left_out(ladder, rep.notes);
    return rep;
  }
  if (const auto m = holm_family(a); m > 0)
    rep.lines.push_back(fmt::format(
        "p: the paired t-test of the difference; Holm: those p-values Holm-adjusted across the {} variant{} compared "
        "with {} at each rung (fewer where a rung lacks their pairs).",
        m, m == 1 ? "" : "s", b));
  const json& boot = field(a, "bootstrap");
  rep.lines.push_back(fmt::format(
      "E rule: {} ({}). Seeds: {}. Intervals: {}.", field(a, "e_rule").is_string() ? text_of(a, "e_rule") : "none",
      text_of(a, "e_rule_why"), field(a, "seeds").dump(),
      !text_of(boot, "none").empty()
          ? "none, " + text_of(boot, "none")
          : fmt::format("{} of {} bootstrap replicates kept: {}{}", field(boot, "kept").dump(),
                        field(boot, "replicates").dump(), text_of(boot, "method"),
                        text_of(boot, "warning").empty() ? "" : " (" + text_of(boot, "warning") + ")")));
  rep.tables.emplace_back("Fits, L(C) = E + A C^-alpha, C in FLOPs, least squares by the E rule", ladder_fit_table(a));
  if (field(a, "huber_fits").is_object() && !a["huber_fits"].empty()) {
    rep.tables.emplace_back("The same law by the field's fit (Huber loss, delta 1e-3, on log residuals; L-BFGS from a "
                            "grid of starts; E at most the lowest observed loss)",
                            ladder_huber_table(a));
    if (!text_of(a, "multipliers_from").empty())
      rep.lines.push_back("Which fit: the multipliers are read from " + text_of(a, "multipliers_from") + ".");
  }
  rep.tables.emplace_back(
      "Trend and extrapolation (below 0 / below 1: the variant's gain grows / it needs less compute)",
      ladder_trend_table(a, vs, rep.notes));
  if (ladder.contains("lr_choice"))
    rep.tables.emplace_back("Rates each variant is judged at (lowest mean final val loss over seeds)",
                            ladder_rate_table(ladder, rep.notes));
  if (ladder.contains("lr_sensitivity"))
    rep.tables.emplace_back(
        "Loss at each rate tried (mean final val loss over seeds, each capped at ln(vocab size), "
        "the loss at initialization, which a diverged seed counts as), its spread and LR "
        "sensitivity (Wortsman et al. 2023: the mean excess over the best rate's loss)",
        lr_sensitivity_table(ladder["lr_sensitivity"], rep.notes));
  add_left_out(ladder, rep.notes);
  if (ladder.contains("extrapolation_note"))
    rep.notes.push_back("no extrapolation: " + ladder["extrapolation_note"].get<std::string>());
  return rep;
}

constexpr const char* kLadderHowToRead =
    "Compute is flops_per_token x tokens (model/counts.h: 6 x the matmul parameters plus attention). Loss: final val "
    "loss, mean over seeds (n). Noise floor: the sample standard deviation of the baseline's final val loss over its "
    "seeds at that rung, from 3 seeds. Difference: variant minus baseline paired by seed, Student's t 95% interval, "
    "the paired t-test's two-sided p and that p Holm-adjusted (Holm 1979) across the variants compared at the rung. "
    "Multiplier: the variant's compute over the compute the baseline's fitted curve needs to reach the variant's "
    "fitted loss at that rung; below 1 the variant needs less; where the baseline has no result at the rung, the "
    "multiplier extrapolates the baseline's curve and is flagged \"x?\", and the trend leaves it out. In time: that "
    "multiplier times the variant's median seconds per step over the baseline's at that rung (paired by seed, "
    "geometric mean): the saving once each step's own cost on this machine is counted. Their intervals and the "
    "trend's are a paired bootstrap over seeds. Extrapolation reads the fitted curves beyond the ladder's computes, "
    "and carries the trend's line there (log multiplier on log compute): projections, not measurements, flagged "
    "\"x?\"; beside each value, how many decades of compute it lies past the ladder, and whether both fits had "
    "residual freedom (more rungs than parameters; without it a curve passes through its rungs exactly and nothing "
    "checks it). A target further past the ladder than the decades its data are taken to carry (1 unless the sweep "
    "file's ladder.extrapolate_decades says more) gets no value, and the notes say how far it lies.";

}  // namespace

std::string ladder_table(const json& summary) {
  if (!summary.contains("ladder")) return "";
  const auto rep = build_ladder_report(summary);
  std::string out =
      fmt::format("\nladder: every variant against {} across its rungs\n", summary["baseline"].get<std::string>());
  for (const auto& l : rep.lines) out += l + "\n";
  for (const auto& [title, t] : rep.tables) out += "\n" + (title.empty() ? "" : title + ":\n") + aligned(t);
  for (const auto& n : rep.notes) out += "note: " + n + "\n";
  return out;
}

std::string ladder_markdown(const json& summary) {
  if (!summary.contains("ladder")) return "";
  const auto rep = build_ladder_report(summary);
  std::string out = fmt::format("\n## Ladder: every variant against {} across sizes\n\n{}\n\n",
                                summary["baseline"].get<std::string>(), kLadderHowToRead);
  for (const auto& l : rep.lines) out += l + "\n\n";
  for (const auto& [title, t] : rep.tables) out += (title.empty() ? "" : "### " + title + "\n\n") + markdown(t) + "\n";
  if (!rep.notes.empty()) {
    out += "### Ladder notes\n\n";
    for (const auto& n : rep.notes) out += "- " + n + "\n";
  }
  return out;
}

}  // namespace xsagpt
