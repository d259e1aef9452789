// A saved run config's meaning, and the first key two resolved run configs differ in (see config_diff.h).
#include "config/config_diff.h"

#include <fmt/format.h>

namespace xsagpt {

namespace {

// Depth first, in the order of `wanted`'s keys, then keys only `saved` has. `raw` is
// `saved` as the file had it, nullptr where the file lacked the key and its default
// stands in: the message says so.
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
  return fmt::format("{} is {} there, {} here", at.empty() ? "the config" : at, saved.dump(), wanted.dump());
}

}  // namespace

json saved_meaning(const json& saved) {
  if (!saved.is_object()) return saved;
  static const json defaults = to_json(RunConfig{});
  json out = saved;
  for (const char* section : {"model", "data", "train"}) {
    if (!out.contains(section) || !out[section].is_object()) continue;
    for (const auto& [k, v] : defaults[section].items())
      if (!out[section].contains(k)) out[section][k] = v;
  }
  return out;
}

std::optional<std::string> config_difference(const json& saved, const json& wanted) {
  if (!saved.is_object()) return std::string("it is not a run config (not a JSON object)");
  return first_difference(saved_meaning(saved), &saved, wanted, "");
}

}  // namespace xsagpt
