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
  TokensSection section;
  file_keys::read(t, section, key);
  if (section.per_param.is_null() == section.flops.is_null())
    schema::bad(key, "{\"per_param\": r} (tokens = r x parameters) or {\"flops\": F or [F per rung]}", t);
  LadderTokenRule r;
  if (!section.flops.is_null()) {
    if (t.contains("params")) throw ConfigError(key + ".params: counts parameters for per_param, not for flops");
    r.flops = per_rung(section.flops, n, key + ".flops");
    r.words = fmt::format(
        "tokens = FLOP budget ({:.3g}{}) / flops_per_token", r.flops.front(),
        r.flops.size() > 1 && r.flops.back() != r.flops.front() ? fmt::format(" ... {:.3g}", r.flops.back()) : "");
    return r;
  }
  const auto& pp = section.per_param;
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
  r.non_embedding = section.params == TokenParams::kNonEmbedding;
  r.words = fmt::format("tokens = {:g} x parameters ({})", fmt::join(r.per_param, ", "),
                        schema::enum_name(section.params));
  return r;
}

LadderLrRule read_lr_rule(const json& l, size_t n, const std::string& where) {
  const std::string key = where + ".lr";
  LrSection section;
  file_keys::read(l, section, key);
  LadderLrRule r;
  if (!section.per_rung.is_null()) {
    if (section.width_exponent || !section.anchor.is_null())
      throw ConfigError(key + ": per_rung is a table; a power law (width_exponent, anchor) is the other rule");
    r.table = per_rung(section.per_rung, n, key + ".per_rung");
    r.words = "lr from a table per rung";
    return r;
  }
  if (!section.width_exponent)
    schema::bad(key,
                "{\"per_rung\": [rate per rung]} or {\"width_exponent\": k, \"anchor\": {\"d_model\": d0, \"lr\": "
                "lr0}}",
                l);
  r.exponent = *section.width_exponent;
  if (section.anchor.is_null())
    throw ConfigError(key +
                      ".anchor: required with width_exponent: the rate at one width, {\"d_model\": d0, "
                      "\"lr\": lr0}, that the power law scales from");
  AnchorSection anchor;
  file_keys::read(section.anchor, anchor, key + ".anchor");
  r.anchor_d = anchor.d_model;
  r.anchor_lr = anchor.lr;
  if (!(r.anchor_d > 0) || !(r.anchor_lr > 0))
    schema::bad(key + ".anchor", "a positive d_model and lr", section.anchor);
  r.words = fmt::format("lr = {:g} x (d_model / {:g})^{:g}", r.anchor_lr, r.anchor_d, r.exponent);
  return r;
}

std::vector<double> read_multipliers(const json& m, const std::string& key) {
  if (m.empty()) schema::bad(key, "a non-empty list of positive numbers, e.g. [0.5, 1, 2]", m);
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

double bench_file_rate(const EstimateSection& e, std::string& says) {
  const std::string file = *e.bench;
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
  const std::string v = e.bench_variant.value_or(step["results"].begin().key());
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

EstimateSection read_estimate(const json& j, const std::string& where, const std::filesystem::path& sweep_dir) {
  EstimateSection e;
  file_keys::read(j, e, where);
  if (e.device && e.bench) throw ConfigError(where + ": device (an assumed MFU) or bench (a measured rate), not both");
  if (e.device) {
    if (!gpu_peak_flops(*e.device, true))
      schema::bad(where + ".device", "a GPU whose peak train/mfu.h knows (H100, H200, A100, B200, L40S, ...)",
                  j["device"]);
    if (!e.mfu)
      throw ConfigError(where +
                        ".mfu: required with device: the share of the GPU's peak a step achieves (measured "
                        "with the default kernels on one H100: 0.38-0.40 at 124M, 0.48-0.49 at 0.7B)");
  }
  if (e.mfu && !e.device) throw ConfigError(where + ".mfu: an MFU needs a device to be of");
  if (e.mfu && !(*e.mfu > 0 && *e.mfu <= 1)) schema::bad(where + ".mfu", "a number in (0, 1]", j["mfu"]);
  if (e.bench_variant && !e.bench)
    throw ConfigError(where + ".bench_variant: names a variant of the bench file's step (with bench)");
  if (e.overhead_s && !(*e.overhead_s >= 0)) schema::bad(where + ".overhead_s", "seconds >= 0", j["overhead_s"]);
  if (e.bench) {  // as given, or beside the sweep file; read now, so a bad one stops nothing midway
    const std::filesystem::path given = *e.bench;
    if (!std::filesystem::exists(given) && std::filesystem::exists(sweep_dir / given))
      e.bench = (sweep_dir / given).string();
    std::string unused;
    bench_file_rate(e, unused);
  }
  return e;
}

}  // namespace xsagpt
