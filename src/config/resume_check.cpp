// The config a resumed run may change (see resume_check.h).
#include "config/resume_check.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace xsagpt {

void check_resume_compatible(const RunConfig& cfg, const json& saved, const std::string& file) {
  const json now = to_json(cfg);
  if (!saved.is_object() || !saved.contains("model")) throw ConfigError(file + ": checkpoint has no model config");
  const json defaults = to_json(ModelConfig{});  // keys newer than the checkpoint take their defaults
  for (const auto& [k, v] : now["model"].items()) {
    const json old = saved["model"].value(k, defaults[k]);
    if (old != v)
      throw ConfigError(
          fmt::format("{}: model.{} is {} in the checkpoint but {} in this config; a resumed run "
                      "must use the same model",
                      file, k, old.dump(), v.dump()));
  }
  for (const char* section : {"train", "data"}) {
    if (!saved.contains(section)) continue;
    for (const auto& [k, v] : now[section].items()) {
      const auto old = saved[section].value(k, json());
      if (old != v)
        spdlog::warn("{}.{}: {} in the checkpoint, {} now; using {}", section, k, old.dump(), v.dump(), v.dump());
    }
  }
}

}  // namespace xsagpt
