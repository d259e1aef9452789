// Whether a run directory's saved config is the run a caller means: two resolved run
// configs (to_json) compared key by key, out_dir aside. out_dir says where a run lies,
// not what it trains, so a run directory or sweep that was copied or moved elsewhere
// still matches the config that made it, while any other difference (a seed, the
// attention, a learning rate) names the first key that differs. "variant" is the
// model's name (config/run_config.h: to_json), absent in older runs: a model that
// differs is named by its own keys.
#pragma once

#include "config/run_config.h"

#include <optional>
#include <string>

namespace xsagpt {

// "model.attention is \"sa\" there, \"xsa\" here" for the first differing key (in
// section order), or nullopt when the two configs agree on everything but out_dir.
// `saved` may be anything (an unreadable or foreign file's JSON): it is then named.
std::optional<std::string> config_difference(const json& saved, const json& wanted);

}  // namespace xsagpt
