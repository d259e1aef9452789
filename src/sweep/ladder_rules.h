// Sweeps, the ladder's rules read from its section (sweep/ladder.h): the token budget
// of each rung, the rate of each rung, the rate multipliers swept, and the "estimate"
// the dry run's time rests on (sweep/ladder_plan.h says what each form means).
#pragma once

#include "config/model_config.h"
#include "sweep/sweep_file.h"

#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace xsagpt {

// tokens = r x parameters (total or non-embedding), or a FLOP budget / flops_per_token.
// Several ratios r (a list) are several budgets per rung: its data ratios, branched
// off one run (sweep/branch.h).
struct LadderTokenRule {
  std::vector<double> per_param;  // the ratios, ascending; empty with a FLOP budget
  bool non_embedding = false;
  std::vector<double> flops;
  std::string words;
  // The tokens rung i asks for at ratio `budget` (an index into per_param), and the
  // parameters it counted (0 for a FLOP budget).
  std::pair<double, int64_t> operator()(size_t i, const ModelConfig& m, int64_t seq_len, size_t budget = 0) const;
  size_t budgets() const { return std::max<size_t>(1, per_param.size()); }
};

LadderTokenRule read_token_rule(const json& tokens, size_t n_rungs, const std::string& where);

// A table of rates, or a power law in width anchored at one size: lr0 (d_model / d0)^k.
struct LadderLrRule {
  std::vector<double> table;
  double exponent = 0, anchor_d = 0, anchor_lr = 0;
  std::string words;
  double operator()(size_t i, int64_t d_model) const;  // rung i's rate
};

LadderLrRule read_lr_rule(const json& lr, size_t n_rungs, const std::string& where);

// "lr_multipliers" (a list, as read), checked (`key` names it in errors): not empty, positive and distinct.
std::vector<double> read_multipliers(const json& multipliers, const std::string& key);

// "estimate", read and checked (`where` names it in errors) and returned with its bench
// file found (as given, or beside the sweep file in `sweep_dir`) and read, so that a bad
// one stops the sweep before anything runs.
EstimateSection read_estimate(const json& estimate, const std::string& where, const std::filesystem::path& sweep_dir);

// The FLOP rate the training step of estimate's "bench" file (`xsagpt bench --json`)
// achieved, of its "bench_variant" (default the file's first): tokens/s times its
// flops_per_token; `says` gets what it rests on, in words.
double bench_file_rate(const EstimateSection& estimate, std::string& says);

}  // namespace xsagpt
