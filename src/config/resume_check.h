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

// A resume on another number of ranks: the checkpoint of a run on `saved_ranks` continues
// on `ranks` when an optimizer step keeps its tokens, split another way (micro_batch x
// accumulation x ranks). The loader's position is the stream's (data/loader.h) and the
// optimizer's state is saved whole however it was sharded (optim/zero.h), so each step
// then trains on the sequences the uninterrupted run's step would have, from the same
// state. A step whose tokens would change is refused (ConfigError naming both splits and
// the settings that keep it): that would be another optimization, not this run continued,
// and train.batch_tokens 0 (micro_batch x seq_len x ranks) would make it one unasked.
// Returns the line the resumed run logs, saying why its losses follow the uninterrupted
// run's to floating-point tolerance only; "" at the same number of ranks, where nothing is
// checked here (a changed batch is one of the train keys check_resume_compatible warns of).
// A changed train.seq_len is left to the loader, which refuses it naming the key.
std::string check_resume_ranks(const RunConfig& cfg, const json& saved, int64_t saved_ranks, int64_t ranks,
                               const std::string& file);

}  // namespace xsagpt
