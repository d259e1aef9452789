#include "eval/report.h"

#include <fmt/format.h>

namespace xsagpt::eval {

static json without_attention_keys(json model) {
  for (const char* k : {"attention", "xsa_layers", "xsa_gate"}) model.erase(k);
  return model;
}

static json metric_pair(double acc, double acc_norm) { return {{"acc", acc}, {"acc_norm", acc_norm}}; }

json eval_report(const std::vector<std::string>& tasks, const std::vector<ModelEval>& models) {
  json report = {{"tasks", tasks}, {"models", json::array()}, {"differences", json::array()}};
  for (const auto& m : models) {
    json results = json::object();
    double acc = 0, acc_norm = 0;
    for (size_t t = 0; t < tasks.size(); ++t) {
      const auto& r = m.results.at(t);
      results[tasks[t]] = {{"acc", r.acc}, {"acc_norm", r.acc_norm}, {"n", r.n}};
      acc += r.acc;
      acc_norm += r.acc_norm;
    }
    const double n = std::max<double>(1, static_cast<double>(tasks.size()));
    report["models"].push_back({{"checkpoint", m.checkpoint}, {"file", m.file}, {"step", m.step},
                                {"attention", m.model.value("attention", std::string("sa"))}, {"model", m.model},
                                {"results", results}, {"average", metric_pair(acc / n, acc_norm / n)}});
  }
  const auto& ms = report["models"];
  std::vector<size_t> sa;
  for (size_t i = 0; i < ms.size(); ++i)
    if (ms[i]["attention"] == "sa") sa.push_back(i);
  for (size_t j = 0; j < ms.size(); ++j) {
    if (ms[j]["attention"] != "xsa") continue;
    std::optional<size_t> partner;
    for (size_t i : sa)
      if (without_attention_keys(ms[i]["model"]) == without_attention_keys(ms[j]["model"])) {
        partner = i;
        break;
      }
    if (!partner && sa.size() == 1) partner = sa.front();
    if (!partner) continue;
    json d = {{"sa", *partner}, {"xsa", j}, {"results", json::object()}};
    for (const auto& t : tasks) {
      const auto &a = ms[*partner]["results"][t], &b = ms[j]["results"][t];
      d["results"][t] = metric_pair(b["acc"].get<double>() - a["acc"].get<double>(),
                                    b["acc_norm"].get<double>() - a["acc_norm"].get<double>());
    }
    const auto &a = ms[*partner]["average"], &b = ms[j]["average"];
    d["average"] = metric_pair(b["acc"].get<double>() - a["acc"].get<double>(),
                               b["acc_norm"].get<double>() - a["acc_norm"].get<double>());
    report["differences"].push_back(d);
  }
  return report;
}

std::string eval_table(const json& report) {
  const auto& ms = report["models"];
  const auto& ds = report["differences"];
  std::string out;
  for (size_t i = 0; i < ms.size(); ++i)
    out += fmt::format("[{}] {} ({}, step {})\n", i + 1, ms[i]["checkpoint"].get<std::string>(),
                       ms[i]["attention"].get<std::string>(), ms[i]["step"].get<int64_t>());
  size_t name_w = 8;
  for (const auto& t : report["tasks"]) name_w = std::max(name_w, t.get<std::string>().size());
  std::string head = fmt::format("\n{:<{}} {:>6}", "task", name_w, "n");
  for (size_t i = 0; i < ms.size(); ++i) head += fmt::format(" {:>10} {:>10}", fmt::format("[{}] acc", i + 1),
                                                             fmt::format("[{}] norm", i + 1));
  for (const auto& d : ds) {
    const auto label = fmt::format("[{}]-[{}]", d["xsa"].get<size_t>() + 1, d["sa"].get<size_t>() + 1);
    head += fmt::format(" {:>12} {:>12}", label + " acc", label + " norm");
  }
  out += head + "\n";
  auto row = [&](const std::string& name, const std::string& n, auto&& model_cell, auto&& diff_cell) {
    std::string line = fmt::format("{:<{}} {:>6}", name, name_w, n);
    for (const auto& m : ms) line += fmt::format(" {:>10.4f} {:>10.4f}", model_cell(m, "acc"), model_cell(m, "acc_norm"));
    for (const auto& d : ds) line += fmt::format(" {:>+12.4f} {:>+12.4f}", diff_cell(d, "acc"), diff_cell(d, "acc_norm"));
    out += line + "\n";
  };
  for (const auto& tj : report["tasks"]) {
    const auto t = tj.get<std::string>();
    const auto n = ms.empty() ? std::string("-") : std::to_string(ms[0]["results"][t]["n"].get<int64_t>());
    row(t, n, [&](const json& m, const char* k) { return m["results"][t][k].get<double>(); },
        [&](const json& d, const char* k) { return d["results"][t][k].get<double>(); });
  }
  row("average", "", [](const json& m, const char* k) { return m["average"][k].get<double>(); },
      [](const json& d, const char* k) { return d["average"][k].get<double>(); });
  return out;
}

}  // namespace xsagpt::eval
