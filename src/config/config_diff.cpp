// The first key two resolved run configs differ in (see config_diff.h).
#include "config/config_diff.h"

#include <fmt/format.h>

namespace xsagpt {

namespace {

// Depth first, in the order of `wanted`'s keys, then keys only `saved` has.
std::optional<std::string> first_difference(const json& saved, const json& wanted, const std::string& at) {
  if (saved.is_object() && wanted.is_object()) {
    for (const auto& [k, v] : wanted.items()) {
      const std::string key = at.empty() ? k : at + "." + k;
      if (at.empty() && (k == "out_dir" || k == "variant")) continue;
      if (!saved.contains(k)) return fmt::format("{} is missing there, {} here", key, v.dump());
      if (auto d = first_difference(saved[k], v, key)) return d;
    }
    for (const auto& [k, v] : saved.items())
      if (!wanted.contains(k) && !(at.empty() && (k == "out_dir" || k == "variant")))
        return fmt::format("{} is {} there, missing here", at.empty() ? k : at + "." + k, v.dump());
    return std::nullopt;
  }
  if (saved == wanted) return std::nullopt;
  return fmt::format("{} is {} there, {} here", at.empty() ? "the config" : at, saved.dump(), wanted.dump());
}

}  // namespace

std::optional<std::string> config_difference(const json& saved, const json& wanted) {
  if (!saved.is_object()) return std::string("it is not a run config (not a JSON object)");
  return first_difference(saved, wanted, "");
}

}  // namespace xsagpt
