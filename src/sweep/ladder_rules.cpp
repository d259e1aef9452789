// The ladder's token, rate and multiplier rules, and its estimate section (see ladder_rules.h).
#include "sweep/ladder_rules.h"

#include "model/counts.h"
#include "train/mfu.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

namespace xsagpt {

namespace {

// One number per rung: a list of that length, or one number for every rung.
std::vector<double> per_rung(const json& v, size_t n, const std::string& key) {
  std::vector<double> out;
  if (v.is_number()) out.assign(n, v.get<double>());
  if (v.is_array()) {
    if (v.size() != n)
      throw ConfigError(fmt::format("{}: {} values for {} rungs; give one per rung", key, v.size(), n));
    for (size_t i = 0; i < n; ++i) {
      if (!v[i].is_number()) schema::bad(fmt::format("{}[{}]", key, i), "a number", v[i]);
      out.push_back(v[i].get<double>());
    }
  }
  if (out.empty()) schema::bad(key, "a number or a list of one number per rung", v);
  for (size_t i = 0; i < n; ++i)
    if (!(out[i] > 0 && std::isfinite(out[i]))) schema::bad(key, "positive numbers", v);
  return out;
}

}  // namespace

std::pair<double, int64_t> LadderTokenRule::operator()(size_t i, const ModelConfig& m, int64_t seq_len,
                                                       size_t budget) const {
  if (!flops.empty()) return {flops[i] / flops_per_token(m, seq_len), 0};
  const auto c = count_params(m);
  const int64_t n = non_embedding ? c.non_embedding : c.total;
  return {per_param.at(budget) * static_cast<double>(n), n};
}

double LadderLrRule::operator()(size_t i, int64_t d_model) const {
  if (!table.empty()) return table[i];
  return anchor_lr * std::pow(static_cast<double>(d_model) / anchor_d, exponent);
}

LadderTokenRule read_token_rule(const json& t, size_t n, const std::string& where) {
  const std::string key = where + ".tokens";
  if (!t.is_object() || t.contains("per_param") == t.contains("flops"))
    schema::bad(key, "{\"per_param\": r} (tokens = r x parameters) or {\"flops\": F or [F per rung]}", t);
  LadderTokenRule r;
  for (const auto& [k, v] : t.items())
    if (k != "per_param" && k != "params" && k != "flops")
      throw ConfigError(fmt::format("{}: unknown key '{}' (known: per_param, params, flops)", key, k));
  if (t.contains("flops")) {
    if (t.contains("params")) throw ConfigError(key + ".params: counts parameters for per_param, not for flops");
    r.flops = per_rung(t["flops"], n, key + ".flops");
    r.words = fmt::format(
        "tokens = FLOP budget ({:.3g}{}) / flops_per_token", r.flops.front(),
        r.flops.size() > 1 && r.flops.back() != r.flops.front() ? fmt::format(" ... {:.3g}", r.flops.back()) : "");
    return r;
  }
  const auto& pp = t["per_param"];
  const char* expected = "a positive number (Chinchilla: 20), or a list of distinct ones (several data ratios)";
  for (const auto& x : pp.is_array() ? pp : json::array({pp})) {
    if (!x.is_number() || !(x.get<double>() > 0) || !std::isfinite(x.get<double>()))
      schema::bad(key + ".per_param", expected, pp);
    if (std::find(r.per_param.begin(), r.per_param.end(), x.get<double>()) != r.per_param.end())
      throw ConfigError(fmt::format("{}.per_param: {} is listed twice", key, x.dump()));
    r.per_param.push_back(x.get<double>());
  }
  if (r.per_param.empty()) schema::bad(key + ".per_param", expected, pp);
  std::sort(r.per_param.begin(), r.per_param.end());
  const std::string params = t.value("params", json("total")).is_string() ? t.value("params", "total") : "";
  if (params != "total" && params != "non_embedding")
    schema::bad(key + ".params", "\"total\" or \"non_embedding\"", t["params"]);
  r.non_embedding = params == "non_embedding";
  r.words = fmt::format("tokens = {:g} x parameters ({})", fmt::join(r.per_param, ", "), params);
  return r;
}

LadderLrRule read_lr_rule(const json& l, size_t n, const std::string& where) {
  const std::string key = where + ".lr";
  const char* expected =
      "{\"per_rung\": [rate per rung]} or {\"width_exponent\": k, \"anchor\": {\"d_model\": d0, \"lr\": lr0}}";
  if (!l.is_object()) schema::bad(key, expected, l);
  for (const auto& [k, v] : l.items())
    if (k != "per_rung" && k != "width_exponent" && k != "anchor")
      throw ConfigError(fmt::format("{}: unknown key '{}' (known: per_rung, width_exponent, anchor)", key, k));
  LadderLrRule r;
  if (l.contains("per_rung")) {
    if (l.contains("width_exponent") || l.contains("anchor"))
      throw ConfigError(key + ": per_rung is a table; a power law (width_exponent, anchor) is the other rule");
    if (!l["per_rung"].is_array()) schema::bad(key + ".per_rung", "a list of one rate per rung", l["per_rung"]);
    r.table = per_rung(l["per_rung"], n, key + ".per_rung");
    r.words = "lr from a table per rung";
    return r;
  }
  if (!l.contains("width_exponent")) schema::bad(key, expected, l);
  schema::read_value(l["width_exponent"], r.exponent, key + ".width_exponent");
  if (!l.contains("anchor"))
    throw ConfigError(key +
                      ".anchor: required with width_exponent: the rate at one width, {\"d_model\": d0, "
                      "\"lr\": lr0}, that the power law scales from");
  const auto& a = l["anchor"];
  if (!a.is_object() || !a.contains("d_model") || !a.contains("lr") || a.size() != 2)
    schema::bad(key + ".anchor", "{\"d_model\": d0, \"lr\": lr0}", a);
  schema::read_value(a["d_model"], r.anchor_d, key + ".anchor.d_model");
  schema::read_value(a["lr"], r.anchor_lr, key + ".anchor.lr");
  if (!(r.anchor_d > 0) || !(r.anchor_lr > 0)) schema::bad(key + ".anchor", "a positive d_model and lr", a);
  r.words = fmt::format("lr = {:g} x (d_model / {:g})^{:g}", r.anchor_lr, r.anchor_d, r.exponent);
  return r;
}

std::vector<double> read_multipliers(const json& section, const std::string& where) {
  if (!section.contains("lr_multipliers")) return {};
  const auto& m = section["lr_multipliers"];
  const std::string key = where + ".lr_multipliers";
  if (!m.is_array() || m.empty()) schema::bad(key, "a non-empty list of positive numbers, e.g. [0.5, 1, 2]", m);
  std::vector<double> out;
  for (const auto& x : m) {
    if (!x.is_number() || !(x.get<double>() > 0) || !std::isfinite(x.get<double>()))
      schema::bad(key, "positive numbers", m);
    if (std::find(out.begin(), out.end(), x.get<double>()) != out.end())
      throw ConfigError(fmt::format("{}: {} is listed twice", key, x.dump()));
    out.push_back(x.get<double>());
  }
  return out;
}

double bench_file_rate(const json& e, std::string& says) {
  const std::string file = e["bench"].get<std::string>();
  std::ifstream in(file);
  if (!in) throw ConfigError(fmt::format("ladder.estimate.bench: cannot read {}", file));
  const json b = json::parse(in, nullptr, false);
  const json step = b.is_object() ? b.value("step", json()) : json();
  if (!step.is_object() || !step.value("results", json()).is_object() || step["results"].empty() ||
      !step.value("flops_per_token", json()).is_number())
    throw ConfigError(
        fmt::format("ladder.estimate.bench: {} is not a JSON file `xsagpt bench --json` wrote with "
                    "a training step (\"step\": results, flops_per_token)",
                    file));
  const std::string v = e.value("bench_variant", step["results"].begin().key());
  const json r = step["results"].value(v, json());
  if (!r.is_object() || !r.value("tokens_per_s", json()).is_number())
    throw ConfigError(fmt::format("ladder.estimate.bench_variant: {} has no training step of variant '{}'", file, v));
  const double tok_s = r["tokens_per_s"].get<double>(), fpt = step["flops_per_token"].get<double>();
  says = fmt::format(
      "measured: `xsagpt bench` in {} ({}, {}): {} {}x{} {} at {:.0f} tokens/s = {:.3g} TFLOP/s achieved{}, "
      "applied to every rung by its FLOPs",
      file, b.value("machine", "machine not recorded"), b.value("date", "undated"), step.value("config", "?"),
      step.value("micro_batch", json()).dump(), step.value("seq_len", json()).dump(), v, tok_s, tok_s * fpt / 1e12,
      r.value("mfu", json()).is_number() ? fmt::format(" (MFU {:.1f}%)", 100 * r["mfu"].get<double>()) : "");
  return tok_s * fpt;
}

json check_estimate(json e, const std::string& where, const std::filesystem::path& sweep_dir) {
  if (!e.is_object()) schema::bad(where, "an object: {\"device\": GPU, \"mfu\": m} or {\"bench\": FILE}", e);
  for (const auto& [k, v] : e.items())
    if (k != "device" && k != "mfu" && k != "bench" && k != "bench_variant" && k != "overhead_s")
      throw ConfigError(
          fmt::format("{}: unknown key '{}' (known: device, mfu, bench, bench_variant, overhead_s)", where, k));
  if (e.contains("device") && e.contains("bench"))
    throw ConfigError(where + ": device (an assumed MFU) or bench (a measured rate), not both");
  if (e.contains("device")) {
    if (!e["device"].is_string() || !gpu_peak_flops(e["device"].get<std::string>(), true))
      schema::bad(where + ".device", "a GPU whose peak train/mfu.h knows (H100, H200, A100, B200, L40S, ...)",
                  e["device"]);
    if (!e.contains("mfu"))
      throw ConfigError(where +
                        ".mfu: required with device: the share of the GPU's peak a step achieves (measured "
                        "with the default kernels on one H100: 0.38-0.40 at 124M, 0.48-0.49 at 0.7B)");
  }
  if (e.contains("mfu") && !e.contains("device")) throw ConfigError(where + ".mfu: an MFU needs a device to be of");
  if (e.contains("mfu") && !(e["mfu"].is_number() && e["mfu"].get<double>() > 0 && e["mfu"].get<double>() <= 1))
    schema::bad(where + ".mfu", "a number in (0, 1]", e["mfu"]);
  if (e.contains("bench") && !e["bench"].is_string()) schema::bad(where + ".bench", "a file path", e["bench"]);
  if (e.contains("bench_variant") && !(e.contains("bench") && e["bench_variant"].is_string()))
    throw ConfigError(where + ".bench_variant: names a variant of the bench file's step (with bench)");
  if (e.contains("overhead_s") && !(e["overhead_s"].is_number() && e["overhead_s"].get<double>() >= 0))
    schema::bad(where + ".overhead_s", "seconds >= 0", e["overhead_s"]);
  if (e.contains("bench")) {  // as given, or beside the sweep file; read now, so a bad one stops nothing midway
    const std::filesystem::path given = e["bench"].get<std::string>();
    if (!std::filesystem::exists(given) && std::filesystem::exists(sweep_dir / given))
      e["bench"] = (sweep_dir / given).string();
    std::string unused;
    bench_file_rate(e, unused);
  }
  return e;
}

}  // namespace xsagpt
