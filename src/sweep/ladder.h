// Sweeps, the ladder: the sweep's points at several model sizes (rungs), each sized,
// budgeted and given its learning rate by rules the sweep file states, so that a
// variant's gain can be read across scale (sweep/ladder_analysis.h fits it). Every
// rung is an ordinary set of overrides: a ladder's point is a normal run in the sweep
// directory, named "<variant>,rung=<rung>[,lr_mult=<m>],<grid values>".
//
// The sweep file's "ladder" section, its keys declared in sweep/sweep_file.h
// (LadderSection, with RungSection, TokensSection, LrSection and EstimateSection): the
// rungs (depths by a width rule, as nanochat's --depth, or model presets, smallest
// first), each rung's token budget (per parameter or a FLOP budget; steps are tokens
// over tokens per step, rounded, and a budget under one step is refused; several
// ratios per parameter are several budgets per rung, an axis "ratio", one run per rung
// at the longest and each shorter one a branch of it: sweep/ladder_budgets.h), each
// rung's rate (a table or a power law in width), optional rate multipliers (an axis
// "lr_mult": each variant judged at its own best rate per rung), what the dry run's
// estimate rests on (sweep/ladder_plan.h), and how far the analysis extrapolates.
// The schedule follows each rung's steps: warmup, evaluations and checkpoints keep the
// fractions of the run that the base config (with "set") gives them (its warmup_steps,
// eval_interval and ckpt_interval over its max_steps; an interval of 0 stays 0), of the
// shortest budget's steps where a rung has several, which share them. The
// ladder owns the keys it sets (ladder_keys()): the variants and the grid may not set
// them, nor may "set" set the size keys or train.lr (its schedule keys are the shape).
#pragma once

#include "config/run_config.h"
#include "sweep/ladder_budgets.h"
#include "sweep/sweep_file.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace xsagpt {

struct LadderRung {
  std::string name;                    // "d4" (depth 4 by the width rule) or the preset's name
  RunConfig config;                    // the base at this size and schedule, with the rung's rate
  int64_t params = 0;                  // every parameter (count_params().total)
  int64_t budget_params = 0;           // the parameters the token rule counted
  double budget_tokens = 0;            // what the rule asked for; tokens() is whole steps of it
  double flops_per_token = 0;          // model/counts.h at the rung's seq_len
  int64_t step_tokens = 0;             // tokens per optimizer step
  double lr = 0;                       // the rate rule's, before any multiplier
  std::vector<std::string> overrides;  // size, per-rung set and schedule: everything but the rate (and the budget)
  std::vector<LadderBudget> budgets;   // several data ratios: each one's, ascending, the last the rung's own
                                       // run (config); empty with one
  int64_t steps() const { return config.train.max_steps; }
  int64_t tokens() const { return steps() * step_tokens; }
  double flops() const { return flops_per_token * static_cast<double>(tokens()); }
};

// A variant's rate tuned at the ladder's smallest rungs (tune_rungs), read from its
// points there each time the sweep is loaded (sweep/ladder_tuning.h).
struct LadderTuning {
  std::string variant;
  std::optional<double> lr_mult;    // the multiplier carried up; nullopt while its tuning rungs run
  std::optional<double> past_edge;  // the multiplier tried past an edge (tune_past_edge), once one won
  bool at_edge = false;             // lr_mult is the smallest or largest multiplier tried
  bool mup = false;                 // its tuning points use model.parametrization "mup"
  json candidates = json::array();  // per multiplier tried: mean final val loss over rungs and seeds, n
  std::string waits;                // why lr_mult is not known yet
};

struct SweepLadder {
  std::vector<LadderRung> rungs;
  std::vector<double> lr_multipliers;                          // empty: one rate per rung and no lr_mult axis
  size_t tune_rungs = 0;                                       // rungs that run every multiplier; 0: all
  bool tune_past_edge = false;                                 // one more multiplier past an edge that wins
  std::string size_rule, token_rule, lr_rule, schedule_rule;   // each rule in words
  std::optional<EstimateSection> estimate;                     // the section's "estimate", its bench file found
  std::vector<std::pair<std::string, double>> extrapolate_to;  // name, training compute (FLOPs)
  std::string extrapolate_note;                                // why there is none, when empty
  double extrapolate_decades = 1;                              // how far past the rungs a multiplier is carried
  bool extrapolate_decades_asked = false;                      // the sweep file set it
};

// The keys every ladder point gets from its rung: model size and schedule, and the rate.
const std::vector<std::string>& ladder_keys();

// A run config resolved from the base with these overrides after the sweep's "set".
using ResolveConfig = std::function<RunConfig(const std::vector<std::string>&)>;

// The keys the rest of the sweep sets on a ladder's points, each with who sets it
// ("variant xsa", "the grid"). A rung's own "set" may set none of them, nor
// model.attention or a key of an attention kind (what a variant is): it would change
// one rung's points alone, silently, under the variant's name; a grid's seed would be
// overridden at one rung. Refused naming the rung, the key and who else sets it.
using PointKeys = std::map<std::string, std::vector<std::string>>;

// Reads and checks the "ladder" section of the sweep file `path`; every rung resolved.
// Every value a rule computes is range-checked before it becomes an override: a token
// budget past 2^62 tokens (a run counts them in 64 bits), a rate that is not a finite
// positive number (a width law whose power overflows or underflows), each refused
// naming the rule and the rung.
SweepLadder read_ladder(const json& section, const std::string& path, const ResolveConfig& resolve, int64_t world_size,
                        const PointKeys& others = {});

// The multipliers past the edges of lr_multipliers that tune_past_edge may add: the
// smallest times its ratio to the next, the largest times its ratio to the one before.
std::pair<double, double> past_edge_multipliers(const std::vector<double>& multipliers);

// Whether rung i runs every multiplier (every rung does unless tune_rungs is set).
inline bool tunes_at(const SweepLadder& l, size_t i) { return l.tune_rungs == 0 || i < l.tune_rungs; }

// A rung's rate times a multiplier, as the --set override its points get.
std::string lr_override(double lr);

}  // namespace xsagpt
