// A saved run config's meaning, and the first key two run configs differ in (see config_diff.h).
#include "config/config_diff.h"

#include <fmt/format.h>

namespace xsagpt {

namespace {

// Depth first, in the order of `wanted`'s keys, then keys only `saved` has. `raw` is
// `saved` as the file had it, nullptr where the file lacked the key and its default
// stands in: the message says so. Both sides are meanings (saved_meaning), so the
// keys of one section are the same on both.
std::optional<std::string> first_difference(const json& saved, const json* raw, const json& wanted,
                                            const std::string& at) {
  if (saved.is_object() && wanted.is_object()) {
    for (const auto& [k, v] : wanted.items()) {
      const std::string key = at.empty() ? k : at + "." + k;
      if (at.empty() && (k == "out_dir" || k == "variant")) continue;
      if (!saved.contains(k)) return fmt::format("{} is missing there, {} here", key, v.dump());
      const json* r = raw && raw->is_object() && raw->contains(k) ? &(*raw)[k] : nullptr;
      if (auto d = first_difference(saved[k], r, v, key)) return d;
    }
    for (const auto& [k, v] : saved.items())
      if (!wanted.contains(k) && !(at.empty() && (k == "out_dir" || k == "variant")))
        return fmt::format("{} is {} there, missing here", at.empty() ? k : at + "." + k, v.dump());
    return std::nullopt;
  }
  if (saved == wanted) return std::nullopt;
  if (!raw) return fmt::format("{} is missing there (its default {}), {} here", at, saved.dump(), wanted.dump());
  // As the file spelled it ("last 2", where its meaning is every layer of two).
  return fmt::format("{} is {} there, {} here", at.empty() ? "the config" : at, raw->dump(), wanted.dump());
}

}  // namespace

json model_meaning(const json& model) {
  // A section this version reads is the model it builds: its fields with their
  // defaults, its kind's keys all written (config/attention_spec.h: meaning). One it
  // cannot read (a newer version's key, a value since refused) stays as written, with
  // the fields it lacks at their defaults, so that what differs is still named.
  try {
    auto c = model_config_from_json(model);
    // μP's keys mean nothing under "sp", and a base head size of head_dim is the 0 that says so.
    const ModelConfig defaults;
    if (!c.mup()) c.mup_base_width = defaults.mup_base_width;
    if (!c.mup() || c.mup_base_head_dim == c.head_dim) c.mup_base_head_dim = defaults.mup_base_head_dim;
    json j = schema::write(c);
    j.update(c.spec().meaning());
    return j;
  } catch (const ConfigError&) {
    static const json defaults = to_json(ModelConfig{});
    json out = model;
    for (const auto& [k, v] : defaults.items())
      if (!out.contains(k)) out[k] = v;
    return out;
  }
}

json saved_meaning(const json& saved) {
  if (!saved.is_object()) return saved;
  static const json defaults = to_json(RunConfig{});
  json out = saved;
  if (out.contains("model") && out["model"].is_object()) out["model"] = model_meaning(out["model"]);
  for (const char* section : {"data", "train"}) {
    if (!out.contains(section) || !out[section].is_object()) continue;
    for (const auto& [k, v] : defaults[section].items())
      if (!out[section].contains(k)) out[section][k] = v;
  }
  return out;
}

std::optional<std::string> config_difference(const json& saved, const json& wanted) {
  if (!saved.is_object()) return std::string("it is not a run config (not a JSON object)");
  return first_difference(saved_meaning(saved), &saved, saved_meaning(wanted), "");
}

}  // namespace xsagpt
