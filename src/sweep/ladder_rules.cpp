// The ladder's token, rate and multiplier rules (see ladder_rules.h).
#include "sweep/ladder_rules.h"

#include "model/counts.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

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

std::pair<double, int64_t> LadderTokenRule::operator()(size_t i, const ModelConfig& m, int64_t seq_len) const {
  if (!flops.empty()) return {flops[i] / flops_per_token(m, seq_len), 0};
  const auto c = count_params(m);
  const int64_t n = non_embedding ? c.non_embedding : c.total;
  return {per_param * static_cast<double>(n), n};
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
  schema::read_value(t["per_param"], r.per_param, key + ".per_param");
  if (!(r.per_param > 0)) schema::bad(key + ".per_param", "a positive number (Chinchilla: 20)", t["per_param"]);
  const std::string params = t.value("params", json("total")).is_string() ? t.value("params", "total") : "";
  if (params != "total" && params != "non_embedding")
    schema::bad(key + ".params", "\"total\" or \"non_embedding\"", t["params"]);
  r.non_embedding = params == "non_embedding";
  r.words = fmt::format("tokens = {:g} x parameters ({})", r.per_param, params);
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

}  // namespace xsagpt
