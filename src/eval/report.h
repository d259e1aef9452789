// What `xsagpt eval` reports for one or several checkpoints: JSON with each model's
// acc / acc_norm (with lm-eval's standard errors) / n per task and their averages
// over tasks (unweighted, as the paper's "Avg"), plus every variant minus the
// baseline; and the same as a side-by-side table. A standard error over fewer than
// two items is null.
//
// Each model has a variant name: the label it was given, else its attention keys
// (xsa, "xsa layers=last 3", "xsa gate=sa", "sa sinks=1"). The baseline is a variant
// named by the caller, else the first model's. Every other model is paired with a
// baseline model as sweeps pair them: equal model configs apart from the variant keys
// (attention, xsa_layers, xsa_gate, n_sink), and among those (seeds of one model) the
// one with the same train.seed, else one not yet paired; without such a partner, the
// baseline model when there is exactly one. Over the pairs of a variant (its seeds)
// the differences get the paired treatment of a sweep (stats/paired.h): mean, 95%
// t interval and paired t-test p, per task and on average; with one pair, no interval. All
// variants are tested against the one baseline, so per task and metric (and on the average)
// their p-values are Holm-adjusted together (stats/holm.h): "p_holm" and "holm_m" beside "p";
// and the baseline's own spread over the seeds it was paired with, "baseline_sd" (sample sd,
// null below 2) of "baseline_n" models: the noise floor, which the table prints from 3.
//
//   {"tasks": [name, ...], "baseline": variant,
//    "models": [{"checkpoint", "file", "step", "variant", "attention", "model": config.model, "seed",
//                "results": {task: {"acc", "acc_stderr", "acc_norm", "acc_norm_stderr", "n"}},
//                "average": {"acc", "acc_stderr", "acc_norm", "acc_norm_stderr"}}],
//    "differences": [{"baseline": i, "model": j, "results": {task: {"acc", "acc_stderr", ...}}, "average": {...}}],
//    "comparisons": [{"variant", "baseline", "pairs": [[i, j], ...],
//                     "results": {task: {"acc": {"n", "mean", "sd", "df", "ci95", "t", "p", "p_holm", "holm_m",
//                                                "baseline_n", "baseline_sd"},
//                                        "acc_norm": ...}},
//                     "average": {...}}]}
// Greedy (LAMBADA-shaped) tasks have no acc_norm and add "perplexity"; the acc_norm
// average is over the tasks that have it.
#pragma once

#include "config/schema.h"
#include "eval/metrics.h"

namespace xsagpt::eval {

struct ModelEval {
  std::string checkpoint;  // as given on the command line
  std::string label;       // the variant name given with it (NAME=PATH), or ""
  std::string file;        // the checkpoint file read
  int64_t step = 0;
  json model;                        // the checkpoint's config.model
  json seed;                         // the run's train.seed, or null
  std::vector<TaskMetrics> results;  // one per task, in report order
};

// `baseline`: a variant name, or "" for the first model's; an unknown name is a ConfigError listing the variants.
json eval_report(const std::vector<std::string>& tasks, const std::vector<ModelEval>& models,
                 const std::string& baseline = "");

// The variant name of a model config without a label: AttentionSpec::name of the
// saved config.model.
std::string variant_of(const json& model);

// Rows: tasks, then the average; columns: acc and acc_norm of each model, then of
// each difference to its baseline model. Models are numbered [1].. in a legend above;
// below, each variant against the baseline over its pairs (seeds).
std::string eval_table(const json& report);

}  // namespace xsagpt::eval
