// Whether a run directory's saved config is the run a caller means: two resolved run
// configs (to_json) compared key by key, out_dir aside. out_dir says where a run lies,
// not what it trains, so a run directory or sweep that was copied or moved elsewhere
// still matches the config that made it, while any other difference (a seed, the
// attention, a learning rate) names the first key that differs. "variant" is the
// model's name (config/run_config.h: to_json), absent in older runs: a model that
// differs is named by its own keys.
//
// A saved config is read for what it means, with the defaults filled in: a key that
// a later version added (model.gelu, train.eval_similarity_sequences) is missing from
// the configs of runs made before it, and every key is added with a default that does
// what those runs did, so its absence means its default. A model section means the
// model it builds: an attention kind's key left out and the same key at its default
// (model.out_gate "headwise" on a gated model), or model.xsa_layers "last N" on an
// N-layer model and null, are one model (config/attention_spec.h: meaning), as are
// "sp" models whose unused μP keys differ. An
// upgrade therefore keeps its runs and sweeps: a sweep continues its points and a
// resume its checkpoint, and the sweep's points are told apart, all through
// saved_meaning, here.
#pragma once

#include "config/run_config.h"

#include <optional>
#include <string>

namespace xsagpt {

// `saved` with every model, data and train key it lacks set to its default (the
// schema's) and its model section as what it means; keys it has, sections it lacks and
// anything not a config stay as they are, so a key of a newer version or a missing
// section is still a difference. A resolved config's to_json reads the same way.
json saved_meaning(const json& saved);

// "model.attention is \"sa\" there, \"xsa\" here" for the first differing key (in
// section order), or nullopt when the two configs agree on everything but out_dir.
// `saved` may be anything (an unreadable or foreign file's JSON): it is then named.
// Both are read through saved_meaning: a key either lacks is its default there.
std::optional<std::string> config_difference(const json& saved, const json& wanted);

}  // namespace xsagpt
