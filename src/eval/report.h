// What `xsagpt eval` reports for one or several checkpoints: JSON with each model's
// acc / acc_norm (with lm-eval's standard errors) / n per task and their averages
// over tasks (unweighted, as the paper's "Avg"), plus XSA - SA differences; and the
// same as a side-by-side table. A standard error over fewer than two items is null.
//
// XSA models are paired with SA ones as sweeps pair them: equal model configs
// apart from the attention keys (attention, xsa_layers, xsa_gate), and among
// those (seeds of one model) the one with the same train.seed, else one not yet
// paired. An XSA model without such a partner is compared with the SA model when
// there is exactly one.
//
//   {"tasks": [name, ...],
//    "models": [{"checkpoint", "file", "step", "attention", "model": config.model, "seed",
//                "results": {task: {"acc", "acc_stderr", "acc_norm", "acc_norm_stderr", "n"}},
//                "average": {"acc", "acc_stderr", "acc_norm", "acc_norm_stderr"}}],
//    "differences": [{"sa": i, "xsa": j, "results": {task: {"acc", "acc_stderr", ...}}, "average": {...}}]}
// Greedy (LAMBADA-shaped) tasks have no acc_norm and add "perplexity"; the acc_norm
// average is over the tasks that have it.
#pragma once

#include "config/schema.h"
#include "eval/metrics.h"

namespace xsagpt::eval {

struct ModelEval {
  std::string checkpoint;  // as given on the command line
  std::string file;        // the checkpoint file read
  int64_t step = 0;
  json model;                        // the checkpoint's config.model
  json seed;                         // the run's train.seed, or null
  std::vector<TaskMetrics> results;  // one per task, in report order
};

json eval_report(const std::vector<std::string>& tasks, const std::vector<ModelEval>& models);

// Rows: tasks, then the average; columns: acc and acc_norm of each model, then of
// each XSA - SA difference. Models are numbered [1].. in a legend above.
std::string eval_table(const json& report);

}  // namespace xsagpt::eval
