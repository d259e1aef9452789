// Which config changes a resumed run accepts: the model must be the one the
// checkpoint holds (its weights and optimizer state only fit that model), while
// train.* and data.* settings may change here (a longer max_steps, another eval
// interval), each change logged; one the restored state cannot follow, such as
// train.optimizer, is refused when that state is loaded. docs/training.md's resume
// table lists them all.
#pragma once

#include "config/run_config.h"

#include <string>

namespace xsagpt {

// `saved` is the config a checkpoint holds; `file` names the checkpoint in errors.
// Keys newer than the checkpoint count as their defaults (saved_meaning,
// config/config_diff.h: the reading a sweep's point check shares). Throws ConfigError
// naming the first model key that differs.
void check_resume_compatible(const RunConfig& cfg, const json& saved, const std::string& file);

}  // namespace xsagpt
