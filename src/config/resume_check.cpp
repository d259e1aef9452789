// The config a resumed run may change (see resume_check.h).
#include "config/resume_check.h"

#include "config/config_diff.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace xsagpt {

void check_resume_compatible(const RunConfig& cfg, const json& saved_config, const std::string& file) {
  const json now = to_json(cfg);
  if (!saved_config.is_object() || !saved_config.contains("model") || !saved_config["model"].is_object())
    throw ConfigError(file + ": checkpoint has no model config");
  const json saved = saved_meaning(saved_config);  // keys newer than the checkpoint take their defaults
  for (const auto& [k, v] : now["model"].items()) {
    const json old = saved["model"].value(k, json());
    if (old != v)
      throw ConfigError(
          fmt::format("{}: model.{} is {} in the checkpoint but {} in this config; a resumed run "
                      "must use the same model",
                      file, k, old.dump(), v.dump()));
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
