// The config a resumed run may change (see resume_check.h).
#include "config/resume_check.h"

#include "config/config_diff.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace xsagpt {

void check_resume_compatible(const RunConfig& cfg, const json& saved_config, const std::string& file) {
  if (!saved_config.is_object() || !saved_config.contains("model") || !saved_config["model"].is_object())
    throw ConfigError(file + ": checkpoint has no model config");
  // Both read for what they mean: keys newer than the checkpoint take their defaults,
  // and a kind's key left out is its default, so spelling a default out is no change.
  const json saved = saved_meaning(saved_config), now = saved_meaning(to_json(cfg));
  // A value as its config spelled it ("last 2"), else the default that stands in.
  auto shown = [](const json& raw, const std::string& k, const json& meaning) {
    return (raw.contains(k) ? raw[k] : meaning).dump();
  };
  json keys = now["model"];
  keys.update(saved["model"]);  // every key either side has, in order
  for (const auto& [k, _] : keys.items()) {
    const json old = saved["model"].value(k, json()), v = now["model"].value(k, json());
    if (old != v)
      throw ConfigError(
          fmt::format("{}: model.{} is {} in the checkpoint but {} in this config; a resumed run "
                      "must use the same model",
                      file, k, shown(saved_config["model"], k, old), shown(to_json(cfg)["model"], k, v)));
  }
  for (const char* section : {"train", "data"}) {
    if (!saved.contains(section) || !saved[section].is_object()) continue;
    for (const auto& [k, v] : now[section].items()) {
      const auto old = saved[section].value(k, json());
      if (old != v)
        spdlog::warn("{}.{}: {} in the checkpoint, {} now; using {}", section, k, old.dump(), v.dump(), v.dump());
    }
  }
}

}  // namespace xsagpt
