#include "eval/report.h"

#include "config/model_config.h"
#include "config/model_section.h"
#include "stats/holm.h"
#include "stats/paired.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include <cmath>
#include <optional>
#include <set>

namespace xsagpt::eval {

namespace {

// The keys that make a variant: the kind, every key a kind owns, and the sinks.
json without_variant_keys(json model) {
  for (const char* k : {"attention", "n_sink"}) model.erase(k);
  for (const auto& kind : attention_kinds())
    for (const auto& k : kind.keys) model.erase(k.name);
  return model;
}

// NaN (a standard error over fewer than two items) is JSON's null.
json number(double v) { return std::isnan(v) ? json(nullptr) : json(v); }
double value(const json& v) { return v.is_number() ? v.get<double>() : std::nan(""); }

// Standard error of a sum or difference of independent estimates.
double combined(const std::vector<double>& se) {
  double s = 0;
  for (double x : se) s += x * x;
  return std::sqrt(s);
}

const char* const kMetrics[] = {"acc", "acc_norm"};

}  // namespace

std::string variant_of(const json& model) {
  ModelConfig c;  // absent keys take their defaults, as the checkpoint's model was built
  read_model_section(model, c, "model");
  return c.spec().name();
}

namespace {

// One model's entry: each task's accuracies with their standard errors, and the paper's
// unweighted mean over tasks (acc_norm over the tasks that have it), whose standard
// error treats the tasks as independent samples.
json model_entry(const std::vector<std::string>& tasks, const ModelEval& m) {
  json results = json::object();
  for (size_t t = 0; t < tasks.size(); ++t) {
    const auto& r = m.results.at(t);
    json o = {{"acc", r.acc}, {"acc_stderr", number(r.acc_stderr)}};
    if (r.has_norm) {
      o["acc_norm"] = r.acc_norm;
      o["acc_norm_stderr"] = number(r.acc_norm_stderr);
    }
    if (r.has_perplexity) o["perplexity"] = r.perplexity;
    o["n"] = r.n;
    results[tasks[t]] = o;
  }
  json average = json::object();
  for (const char* k : kMetrics) {
    double sum = 0;
    std::vector<double> se;
    for (const auto& t : tasks)
      if (results[t].contains(k)) {
        sum += results[t][k].get<double>();
        se.push_back(value(results[t][std::string(k) + "_stderr"]));
      }
    if (se.empty()) continue;
    const auto n = static_cast<double>(se.size());
    average[k] = sum / n;
    average[std::string(k) + "_stderr"] = number(combined(se) / n);
  }
  return {{"checkpoint", m.checkpoint},
          {"file", m.file},
          {"step", m.step},
          {"variant", m.label.empty() ? variant_of(m.model) : m.label},
          {"attention", m.model.value("attention", std::string(attention_kinds().front().name))},
          {"model", m.model},
          {"seed", m.seed},
          {"results", results},
          {"average", average}};
}

// Model minus its baseline model, with the standard error of a difference of
// independent estimates (an upper bound for the paired one on the same items).
json difference(const json& a, const json& b) {
  json d = json::object();
  for (const char* k : kMetrics) {
    if (!a.contains(k) || !b.contains(k)) continue;
    const std::string se = std::string(k) + "_stderr";
    d[k] = b[k].get<double>() - a[k].get<double>();
    d[se] = number(combined({value(a[se]), value(b[se])}));
  }
  return d;
}

using Pairs = std::map<std::string, std::vector<std::pair<size_t, size_t>>>;  // variant -> (baseline, model)

// Each model that is not the baseline, paired with a baseline model of the same config:
// the one of its seed, else one not yet used, else the first; a lone baseline model
// stands for every config. report["differences"] gets each pair's differences.
Pairs pair_with_baseline(json& report, const std::vector<std::string>& tasks, const std::string& baseline) {
  const auto& ms = report["models"];
  std::vector<size_t> base;
  for (size_t i = 0; i < ms.size(); ++i)
    if (ms[i]["variant"] == baseline) base.push_back(i);
  std::set<size_t> used;
  Pairs pairs;
  for (size_t j = 0; j < ms.size(); ++j) {
    if (ms[j]["variant"] == baseline) continue;
    std::vector<size_t> alike;  // baseline models of the same config: seeds of one model
    for (size_t i : base)
      if (without_variant_keys(ms[i]["model"]) == without_variant_keys(ms[j]["model"])) alike.push_back(i);
    std::optional<size_t> partner;
    for (size_t i : alike)
      if (!partner && !ms[j]["seed"].is_null() && ms[i]["seed"] == ms[j]["seed"]) partner = i;
    for (size_t i : alike)
      if (!partner && !used.count(i)) partner = i;
    if (!partner && !alike.empty()) partner = alike.front();
    if (!partner && base.size() == 1) partner = base.front();
    if (!partner) continue;
    used.insert(*partner);
    pairs[ms[j]["variant"].get<std::string>()].emplace_back(*partner, j);
    json d = {{"baseline", *partner}, {"model", j}, {"results", json::object()}};
    for (const auto& t : tasks) d["results"][t] = difference(ms[*partner]["results"][t], ms[j]["results"][t]);
    d["average"] = difference(ms[*partner]["average"], ms[j]["average"]);
    report["differences"].push_back(d);
  }
  return pairs;
}

// Over a variant's pairs (its seeds): the paired statistics of each metric's differences,
// and beside them the baseline's own spread over the seeds it was paired with (the noise floor).
template <typename Of>
json over_pairs(const json& ms, const std::vector<std::pair<size_t, size_t>>& ps, Of&& of) {
  json out = json::object();
  for (const char* k : kMetrics) {
    std::vector<double> d, base;
    std::set<size_t> seen;  // a baseline model paired twice counts once
    for (const auto& [i, j] : ps)
      if (of(ms[i]).contains(k) && of(ms[j]).contains(k)) {
        d.push_back(of(ms[j])[k].template get<double>() - of(ms[i])[k].template get<double>());
        if (seen.insert(i).second) base.push_back(of(ms[i])[k].template get<double>());
      }
    if (d.empty()) continue;
    const auto s = paired_stats(d);
    const auto b = paired_stats(base);  // its sample sd
    out[k] = {{"n", s.n},
              {"mean", s.mean},
              {"sd", s.sd ? json(*s.sd) : json(nullptr)},
              {"df", s.n - 1},
              {"ci95", s.ci_low ? json::array({*s.ci_low, *s.ci_high}) : json(nullptr)},
              {"t", s.t ? json(*s.t) : json(nullptr)},
              {"p", s.p ? json(*s.p) : json(nullptr)},
              {"baseline_n", b.n},
              {"baseline_sd", b.sd ? json(*b.sd) : json(nullptr)}};
  }
  return out;
}

// Every variant is tested against the same baseline: per task and metric, and on the
// average, the variants' tests are one family whose p-values are Holm-adjusted together.
void holm_per_task(json& comparisons, const std::vector<std::string>& tasks) {
  auto adjust = [&](auto&& of) {
    for (const char* k : kMetrics) {
      std::vector<json*> family;
      for (auto& c : comparisons)
        if (json& o = of(c); o.contains(k)) family.push_back(&o[k]);
      holm_across(family);
    }
  };
  for (const auto& t : tasks) adjust([&](json& c) -> json& { return c["results"][t]; });
  adjust([](json& c) -> json& { return c["average"]; });
}

}  // namespace

json eval_report(const std::vector<std::string>& tasks, const std::vector<ModelEval>& models,
                 const std::string& baseline_name) {
  json report = {
      {"tasks", tasks}, {"models", json::array()}, {"differences", json::array()}, {"comparisons", json::array()}};
  for (const auto& m : models) report["models"].push_back(model_entry(tasks, m));
  const auto& ms = report["models"];
  if (ms.empty()) return report;
  std::vector<std::string> variants;  // in the order given
  for (const auto& m : ms)            // as a string: g++ 13 finds std::string == json ambiguous
    if (const auto v = m["variant"].get<std::string>();
        std::find(variants.begin(), variants.end(), v) == variants.end())
      variants.push_back(v);
  const std::string baseline = baseline_name.empty() ? variants.front() : baseline_name;
  if (std::find(variants.begin(), variants.end(), baseline) == variants.end())
    throw ConfigError(
        fmt::format("--baseline: '{}' is none of the models' variants ({})", baseline, fmt::join(variants, ", ")));
  report["baseline"] = baseline;
  Pairs pairs = pair_with_baseline(report, tasks, baseline);
  for (const auto& v : variants) {
    if (v == baseline || !pairs.count(v)) continue;
    const auto& ps = pairs[v];
    json c = {{"variant", v}, {"baseline", baseline}, {"pairs", json::array()}, {"results", json::object()}};
    for (const auto& [i, j] : ps) c["pairs"].push_back({i, j});
    for (const auto& t : tasks)
      c["results"][t] = over_pairs(ms, ps, [&](const json& m) -> const json& { return m["results"][t]; });
    c["average"] = over_pairs(ms, ps, [](const json& m) -> const json& { return m["average"]; });
    report["comparisons"].push_back(c);
  }
  holm_per_task(report["comparisons"], tasks);
  return report;
}

namespace {

std::string cell(const json& o, const char* k, bool sign) {
  if (!o.contains(k)) return "-";
  const auto se = o.value(std::string(k) + "_stderr", json(nullptr));
  const double x = o[k].get<double>();
  const auto v = sign ? fmt::format("{:+.4f}", x) : fmt::format("{:.4f}", x);
  return se.is_number() ? fmt::format("{}±{:.4f}", v, se.get<double>()) : v;
}

}  // namespace

std::string eval_table(const json& report) {
  const auto& ms = report["models"];
  const auto& ds = report["differences"];
  std::string out;
  for (size_t i = 0; i < ms.size(); ++i)
    out += fmt::format("[{}] {} ({}{}, step {})\n", i + 1, ms[i]["checkpoint"].get<std::string>(),
                       ms[i]["variant"].get<std::string>(), ms[i]["variant"] == report["baseline"] ? ", baseline" : "",
                       ms[i]["step"].get<int64_t>());
  size_t name_w = 8;
  for (const auto& t : report["tasks"]) name_w = std::max(name_w, t.get<std::string>().size());
  std::string head = fmt::format("\n{:<{}} {:>6}", "task", name_w, "n");
  for (size_t i = 0; i < ms.size(); ++i)
    head += fmt::format(" {:>15} {:>15}", fmt::format("[{}] acc", i + 1), fmt::format("[{}] norm", i + 1));
  for (const auto& d : ds) {
    const auto label = fmt::format("[{}]-[{}]", d["model"].get<size_t>() + 1, d["baseline"].get<size_t>() + 1);
    head += fmt::format(" {:>16} {:>16}", label + " acc", label + " norm");
  }
  out += head + "\n";
  auto row = [&](const std::string& name, const std::string& n, auto&& model_of, auto&& diff_of) {
    std::string line = fmt::format("{:<{}} {:>6}", name, name_w, n);
    for (const auto& m : ms)
      line += fmt::format(" {:>15} {:>15}", cell(model_of(m), "acc", false), cell(model_of(m), "acc_norm", false));
    for (const auto& d : ds)
      line += fmt::format(" {:>16} {:>16}", cell(diff_of(d), "acc", true), cell(diff_of(d), "acc_norm", true));
    out += line + "\n";
  };
  for (const auto& tj : report["tasks"]) {
    const auto t = tj.get<std::string>();
    const auto n = ms.empty() ? std::string("-") : std::to_string(ms[0]["results"][t]["n"].get<int64_t>());
    row(
        t, n, [&](const json& m) -> const json& { return m["results"][t]; },
        [&](const json& d) -> const json& { return d["results"][t]; });
  }
  row(
      "average", "", [](const json& m) -> const json& { return m["average"]; },
      [](const json& d) -> const json& { return d["average"]; });
  out +=
      "± one standard error (lm-eval's: sample std / sqrt(n)); differences and averages treat their parts as "
      "independent\n";
  if (report.value("comparisons", json::array()).empty()) return out;
  // Each variant against the baseline over its pairs (seeds), as a sweep's report gives them.
  auto paired = [](const json& o, const char* k) {
    if (!o.contains(k)) return std::string("-");
    const auto& d = o[k];
    auto text = fmt::format("{:+.4f}", d["mean"].get<double>());
    if (!d["ci95"].is_array()) return text + " (one pair: no interval)";
    text += fmt::format(" [{:+.4f}, {:+.4f}]", d["ci95"][0].get<double>(), d["ci95"][1].get<double>());
    // The noise floor, from 3 baseline seeds: the baseline's own sd over them.
    const auto floor = d.value("baseline_n", 0) >= 3 && d["baseline_sd"].is_number()
                           ? fmt::format(" floor={:.4f}", d["baseline_sd"].get<double>())
                           : std::string();
    if (!d["p"].is_number()) return text + " p=- Holm=-" + floor;
    return text + fmt::format(" p={:.3g} Holm={:.3g}", d["p"].get<double>(), d.at("p_holm").get<double>()) + floor;
  };
  size_t m = 0;  // the largest family: the variants with a p-value on some task
  for (const auto& c : report["comparisons"])
    for (const auto& o : c["results"])
      for (const auto& [k, d] : o.items()) m = std::max(m, d.value("holm_m", size_t{0}));
  out += fmt::format(
      "\nvariant - {} over paired seeds: mean [95% t interval] paired t-test p, and Holm: p Holm-adjusted across "
      "the {} variant{} compared with it on each task and metric; floor: the baseline's own sample sd over its "
      "seeds, from 3 (pairs)\n",
      report["baseline"].get<std::string>(), m, m == 1 ? "" : "s");
  out += fmt::format("{:<24} {:<{}} {:>64} {:>64}\n", "variant", "task", name_w, "acc", "acc_norm");
  for (const auto& c : report["comparisons"]) {
    auto line = [&](const std::string& task, const json& o) {
      out += fmt::format("{:<24} {:<{}} {:>64} {:>64}  ({})\n", c["variant"].get<std::string>(), task, name_w,
                         paired(o, "acc"), paired(o, "acc_norm"), c["pairs"].size());
    };
    for (const auto& t : report["tasks"]) line(t.get<std::string>(), c["results"][t.get<std::string>()]);
    line("average", c["average"]);
  }
  return out;
}

}  // namespace xsagpt::eval
