// The sweep's comparison tables, as text and as markdown (sweep/report.h).
#include "sweep/report.h"

#include "sweep/grid.h"
#include "sweep/ladder_report.h"
#include "sweep/text_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

namespace xsagpt {

namespace {

using Row = TableRow;
using Table = TextTable;  // its title: the setting of the other keys, or "" for a sweep over variants alone

constexpr size_t kTablesPerSetting = 3;  // final loss; equal time and tokens; iso-loss multiplier

std::string fixed4(const json& v, bool sign = false) {
  if (!v.is_number()) return "-";
  return bounded_fixed(v.get<double>(), 4, sign);
}

std::string mean_sd(const json& s) {
  if (!s["mean"].is_number()) return "-";
  return fixed4(s["mean"]) + (s["std"].is_number() ? " ± " + fixed4(s["std"]) : " (one seed: no sd)");
}

// A p-value's cell, or why there is none.
std::string p_cell(const json& d, const char* key) {
  const json& p = d.contains(key) ? d[key] : json();
  return p.is_number() ? fmt::format("{:.3g}", p.get<double>()) : "- (no spread)";
}

// The paired difference's four cells: mean, 95% interval, p and p Holm-adjusted across the variants (or why
// there are none).
Row paired_cells(const json& d) {
  const auto n = d["n"].get<int64_t>();
  if (n == 0) return {"-", "-", "-", "-"};
  Row r{fixed4(d["mean"], true)};
  if (n < 2) return {r[0], "no interval (one seed)", "-", "-"};
  r.push_back(d["ci95"].is_array() ? fmt::format("[{}, {}]", fixed4(d["ci95"][0], true), fixed4(d["ci95"][1], true))
                                   : "-");
  r.push_back(p_cell(d, "p"));
  r.push_back(p_cell(d, "p_holm"));
  return r;
}

// The head of a Holm column: the family's size, as the comparisons of one setting hold it at `path`.
std::string holm_head(const std::vector<const json*>& cs, const char* path) {
  size_t m = 0;
  for (const json* c : cs) m = std::max(m, c->value(json::json_pointer(path), json(0)).get<size_t>());
  return m == 0 ? "p Holm" : fmt::format("p Holm ({} variant{})", m, m == 1 ? "" : "s");  // 0: no p to adjust
}

// The noise floor beside a difference: the sample standard deviation of the baseline's
// own final val loss over its seeds, given from 3 seeds (the sd of 2 rests on one degree of freedom).
std::string noise_floor(const json& baseline) {
  if (!baseline["std"].is_number() || baseline["n"].get<int64_t>() < 3) return "- (under 3 seeds)";
  return fixed4(baseline["std"]);
}

// The iso-loss multiplier's cells on one axis: multiplier, 95% interval, p, p Holm, seeds that reached the target.
Row iso_cells(const json& m) {
  const auto n = m["n"].get<int64_t>();
  const auto total = n + m["not_reached"].size() + m["skipped"].size();
  const std::string reached = fmt::format("{} of {}", n, total);
  if (n == 0) return {"-", "-", "-", "-", reached};
  const std::string mult = bounded_fixed(m["multiplier"].get<double>(), 3) + "x";
  if (n < 2) return {mult, "no interval (one seed)", "-", "-", reached};
  return {mult,
          m["ci95"].is_array() ? fmt::format("[{}, {}]", bounded_fixed(m["ci95"][0].get<double>(), 3),
                                             bounded_fixed(m["ci95"][1].get<double>(), 3))
                               : "-",
          p_cell(m, "p"), p_cell(m, "p_holm"), reached};
}

// Where each equal-time pair was read, in seed order: the earlier end, and whose it was.
std::string read_at(const json& eq, const std::string& variant, const std::string& baseline) {
  std::string out;
  for (const auto& a : eq["at"]) {
    const auto whose = a["end_of"].get<std::string>();
    out += fmt::format("{}{:.4g} s ({})", out.empty() ? "" : ", ", a["x"].get<double>(),
                       whose == "variant"    ? variant
                       : whose == "baseline" ? baseline
                                             : "both");
  }
  return out.empty() ? "-" : out;
}

std::string setting(const json& values) {
  std::string out;
  for (const auto& [k, v] : values.items()) out += (out.empty() ? "" : ", ") + k + "=" + value_text(v);
  return out;
}

// What a comparison left out, and why, as the lines under the tables: seeds not
// paired, pairs read at the variant's own end, multipliers not computed.
void comparison_notes(const json& c, const std::string& who, const std::string& b, std::vector<std::string>& notes) {
  for (const auto& d : c["minus_baseline"]["dropped"])
    notes.push_back(fmt::format("{}: seed {} not paired: {}", who, value_text(d["seed"]), d["why"].get<std::string>()));
  for (const char* k : {"equal_time", "equal_tokens"})
    for (const auto& x : c[k]["extrapolation_refused"])
      notes.push_back(fmt::format(
          "{}: seed {} left out of the equal-{} comparison: one curve starts (variant {:.4g}, {} {:.4g}) after "
          "the other ends ({:.4g}); reading it there would extrapolate",
          who, value_text(x["seed"]), std::string(k) == "equal_time" ? "time" : "token",
          x["variant_start"].get<double>(), b, x["baseline_start"].get<double>(), x["x"].get<double>()));
  for (const auto& a : c["equal_tokens"]["at"])
    if (a["end_of"] == "variant")
      notes.push_back(fmt::format("{}: seed {} saw fewer tokens than {}: compared at its own end, {:.0f} tokens", who,
                                  value_text(a["seed"]), b, a["x"].get<double>()));
  for (const char* k : {"tokens", "time"}) {
    const auto& m = c["iso_loss"][k];
    const bool time = std::string(k) == "time";
    for (const auto& x : m["not_reached"])
      notes.push_back(
          fmt::format("{}: seed {} never reached {}'s final val loss {} (its best: {}, by {}): no iso-loss "
                      "multiplier in {} for it, none extrapolated",
                      who, value_text(x["seed"]), b, bounded_fixed(x["target"].get<double>(), 4),
                      bounded_fixed(x["variant_best"].get<double>(), 4),
                      time ? fmt::format("{:.4g} s", x["variant_end"].get<double>())
                           : fmt::format("{:.0f} tokens", x["variant_end"].get<double>()),
                      k));
  }
  // A seed without a ratio: named once where both axes leave it out for one reason
  // (sweep/iso_loss.h decides on the losses alone, so they do unless a curve is empty).
  const auto& by_tokens = c["iso_loss"]["tokens"]["skipped"];
  const auto& by_time = c["iso_loss"]["time"]["skipped"];
  for (const auto& x : by_tokens)
    notes.push_back(
        fmt::format("{}: seed {}: no iso-loss multiplier in {}: {}", who, value_text(x["seed"]),
                    std::find(by_time.begin(), by_time.end(), x) != by_time.end() ? "tokens or time" : "tokens",
                    x["why"].get<std::string>()));
  for (const auto& x : by_time)
    if (std::find(by_tokens.begin(), by_tokens.end(), x) == by_tokens.end())
      notes.push_back(fmt::format("{}: seed {}: no iso-loss multiplier in time: {}", who, value_text(x["seed"]),
                                  x["why"].get<std::string>()));
}

// Three tables (final loss; equal time and tokens; the iso-loss multiplier) per setting of the other keys, and
// the notes.
std::vector<Table> tables(const json& summary, std::vector<std::string>& notes) {
  const std::string b = summary["baseline"].get<std::string>();
  std::vector<Table> out;
  // The comparisons of each setting, the settings in the order of their first one,
  // through an index: linear in the comparisons however many settings a grid has.
  std::vector<json> settings;
  std::vector<std::vector<const json*>> of_setting;
  std::map<json, size_t> index;
  for (const auto& c : summary["comparisons"]) {
    const auto [it, added] = index.try_emplace(c["values"], settings.size());
    if (added) {
      settings.push_back(c["values"]);
      of_setting.emplace_back();
    }
    of_setting[it->second].push_back(&c);
  }
  for (size_t k = 0; k < settings.size(); ++k) {
    const auto& values = settings[k];
    const std::string where = setting(values);
    const auto& cs = of_setting[k];
    Table fin{where,
              {"variant", "final val loss (mean ± sd)", "n", "- " + b + " (paired)", "95% CI", "p",
               holm_head(cs, "/minus_baseline/holm_m"), "pairs", "noise floor: sd of " + b},
              {}};
    Table eq{where,
             {"variant", "step time / " + b, "equal time: - " + b, "95% CI", "p", holm_head(cs, "/equal_time/holm_m"),
              "pairs", "time read at", "equal tokens: - " + b, "95% CI", "p", holm_head(cs, "/equal_tokens/holm_m"),
              "pairs"},
             {}};
    Table iso{where,
              {"variant", "tokens to " + b + "'s final loss / " + b + "'s", "95% CI", "p",
               holm_head(cs, "/iso_loss/tokens/holm_m"), "reached", "time to it / " + b + "'s", "95% CI", "p",
               holm_head(cs, "/iso_loss/time/holm_m"), "reached"},
              {}};
    bool first = true;
    for (const json* cp : cs) {
      const json& c = *cp;
      if (first) {
        const auto& s = c["baseline_final_val_loss"];
        fin.rows.push_back(
            {b + " (baseline)", mean_sd(s), std::to_string(s["n"].get<int64_t>()), "", "", "", "", "", ""});
        first = false;
      }
      const auto v = c["variant"].get<std::string>();
      const auto& s = c["final_val_loss"];
      Row r{v, mean_sd(s), std::to_string(s["n"].get<int64_t>())};
      for (auto& cell : paired_cells(c["minus_baseline"])) r.push_back(cell);
      r.push_back(std::to_string(c["minus_baseline"]["n"].get<int64_t>()));
      r.push_back(noise_floor(c["baseline_final_val_loss"]));
      fin.rows.push_back(r);

      const auto& ratio = c["step_time_ratio"];
      Row e{v, ratio.value("geomean", json()).is_number() ? bounded_fixed(ratio["geomean"].get<double>(), 3) : "-"};
      for (const char* k : {"equal_time", "equal_tokens"}) {
        for (auto& cell : paired_cells(c[k])) e.push_back(cell);
        e.push_back(std::to_string(c[k]["n"].get<int64_t>()));
        if (std::string(k) == "equal_time") e.push_back(read_at(c[k], v, b));
      }
      eq.rows.push_back(e);
      Row m{v};
      for (const char* k : {"tokens", "time"})
        for (auto& cell : iso_cells(c["iso_loss"][k])) m.push_back(cell);
      iso.rows.push_back(m);

      comparison_notes(c, v + (where.empty() ? "" : " (" + where + ")"), b, notes);
    }
    out.push_back(std::move(fin));
    out.push_back(std::move(eq));
    out.push_back(std::move(iso));
  }
  return out;
}

// One row per trend of sweep/dial_trend.h: the difference's slope per doubling of a numeric key.
std::optional<Table> trend_table(const json& summary) {
  const auto& trends = summary.value("trends", json::array());
  if (trends.empty()) return std::nullopt;
  const std::string b = summary["baseline"].get<std::string>();
  Table t{
      "",
      {"variant", "key", "other keys", "- " + b + " per doubling", "95% CI", "pairs", "mean - " + b + " at each value"},
      {}};
  for (const auto& d : trends) {
    std::string levels;
    for (const auto& l : d["levels"])
      levels += fmt::format("{}{}: {}", levels.empty() ? "" : ", ", value_text(l["value"]), fixed4(l["mean"], true));
    t.rows.push_back({d["variant"].get<std::string>(), d["key"].get<std::string>(),
                      d["values"].empty() ? "-" : setting(d["values"]), fixed4(d["slope"], true),
                      d["ci95"].is_array()
                          ? fmt::format("[{}, {}]", fixed4(d["ci95"][0], true), fixed4(d["ci95"][1], true))
                          : d.value("why", std::string("-")),
                      std::to_string(d["n"].get<int64_t>()), levels.empty() ? "-" : levels});
  }
  return t;
}

constexpr const char* kHowToRead =
    "Differences are variant minus baseline, paired by seed (the same seed: the same initial weights and data "
    "order); negative means a lower loss than the baseline. 95% CI: Student's t interval of the mean difference "
    "(n - 1 degrees of freedom); p: the paired t-test, two-sided, as if this variant were the only one tested; "
    "p Holm (m variants): the same p-values Holm-adjusted (Holm 1979) across the m variants compared with the "
    "baseline at this setting on this measure (those with a p-value), which keeps the chance of any false finding "
    "among them at the level read (for a single variant it is p). Noise floor: the sample standard deviation of the "
    "baseline's own final val loss across its seeds, given from 3 seeds: a difference not well beyond it is within "
    "what reseeding the baseline alone moves. Equal time: both val curves of a pair read "
    "(linearly between evaluations) at the earlier of their two final wall-clock times, the variant's minus the "
    "baseline's, so no curve is extrapolated and a faster variant keeps its seed; \"time read at\" gives that time "
    "per pair in seed order and whose end it is. Equal tokens: the same at the earlier final token count. Step "
    "time: the variant's median seconds per step over the baseline's (geometric mean over pairs). Iso-loss multiplier: the tokens "
    "(or seconds) at which the variant's val curve first reaches the baseline's final val loss, over those at "
    "which the baseline's curve first reached it, per seed (read linearly between evaluations); below 1 the "
    "variant needs less. Its mean is the geometric mean over seeds, its 95% CI Student's t on the mean log ratio "
    "(n - 1 degrees of freedom) mapped back by exp, p the t-test of log ratio 0 (and Holm-adjusted as above); a seed "
    "that never reaches the target is named in the notes and left out, never extrapolated (\"reached\"); so is a "
    "seed whose baseline never went below its first evaluation, or whose variant starts at the target, in both "
    "columns alike.";

constexpr const char* kHowToReadTrend =
    "Each row: the variant's paired differences (final val loss minus the baseline's, same seed and values) "
    "against log2 of a numeric grid key, the other keys held; the least-squares slope is the change in the "
    "difference per doubling of the key (negative: the difference falls along it, a lead that widens or a deficit "
    "that shrinks), its 95% CI Student's t on "
    "the residuals (pairs - 2 degrees of freedom).";

}  // namespace

std::string comparison_table(const json& summary) {
  std::vector<std::string> notes;
  const auto ts = tables(summary, notes);
  std::string out;
  for (size_t i = 0; i < ts.size(); ++i) {
    if (i % kTablesPerSetting == 0 && !ts[i].title.empty()) out += "\n" + ts[i].title + ":\n";
    out += "\n" + aligned(ts[i]);
  }
  if (const auto t = trend_table(summary)) out += "\nTrend along the grid's numeric keys:\n\n" + aligned(*t);
  for (const auto& n : notes) out += "note: " + n + "\n";
  return out;
}

std::string sweep_report(const json& summary, const std::filesystem::path& dir) {
  std::vector<std::string> notes;
  const auto ts = tables(summary, notes);
  const auto b = summary["baseline"].get<std::string>();
  std::string out = fmt::format("# Sweep {}: every variant against {}\n\n{}\n", dir.filename().string(), b, kHowToRead);
  for (size_t i = 0; i < ts.size(); ++i) {
    if (i % kTablesPerSetting == 0) {
      if (!ts[i].title.empty()) out += "\n## " + ts[i].title + "\n";
      out += "\n### Final val loss\n\n";
    } else if (i % kTablesPerSetting == 1) {
      out += "\n### Equal wall-clock time and equal tokens\n\n";
    } else {
      out += "\n### Iso-loss compute multiplier\n\n";
    }
    out += markdown(ts[i]);
  }
  if (const auto t = trend_table(summary))
    out += fmt::format("\n## Trend along the grid's numeric keys\n\n{}\n\n{}", kHowToReadTrend, markdown(*t));
  if (!notes.empty()) {
    out += "\n## Notes\n\n";
    for (const auto& n : notes) out += "- " + n + "\n";
  }
  out += ladder_markdown(summary);
  size_t total = 0, done = 0;
  std::string left;  // every point not done, with why: a summary written while some failed names them
  for (const auto& p : summary["points"]) {
    ++total;
    done += p["status"] == "done";
    if (p["status"] == "done") continue;
    json why = p.value("error", json());  // failed or invalid: why; running or pending: where it stands
    if (why.is_null()) why = p.value("detail", json());
    left += fmt::format("- {}: {}{}\n", p["name"].get<std::string>(), p["status"].get<std::string>(),
                        why.is_null() ? "" : ": " + (why.is_string() ? why.get<std::string>() : why.dump()));
  }
  if (!left.empty()) out += "\n## Points not done\n\n" + left;
  out += fmt::format(
      "\n{} of {} points finished; summary.json holds every figure above at full precision, plots/ "
      "the curves (scripts/view/plot.py).\n",
      done, total);
  return out;
}

}  // namespace xsagpt
