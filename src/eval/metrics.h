// Task metrics as lm-evaluation-harness 0.4.13 defines them, per item shape
// (eval/task_file.h):
//   choice / contexts  acc       the choice with the highest summed log-probability
//                                is the label (ties: the first, numpy's argmax);
//                      acc_norm  the same after dividing each log-probability by the
//                                length in characters (code points, Python's len) of
//                                the choice as doc_to_choice gives it: the ending
//                                without the target delimiter, or for partial
//                                scoring the context;
//   greedy             acc       every continuation token is the model's argmax
//                                (is_greedy); perplexity exp(-mean log-likelihood).
// Standard errors are lm-eval's mean_stderr: the sample standard deviation (n - 1)
// over sqrt(n); NaN for fewer than two items (lm-eval's "N/A").
#pragma once

#include "eval/task_file.h"

#include <vector>

namespace xsagpt::eval {

struct ChoiceScore {
  double logprob = 0;
  bool is_greedy = false;
};

struct TaskMetrics {
  double acc = 0, acc_stderr = 0;
  bool has_norm = false;  // choice and contexts shapes
  double acc_norm = 0, acc_norm_stderr = 0;
  bool has_perplexity = false;  // greedy shape
  double perplexity = 0;
  int64_t n = 0;  // items
};

// scores[i][k]: the k-th request of item i (McItem::requests()).
TaskMetrics task_metrics(const McTask& task, const std::vector<std::vector<ChoiceScore>>& scores);

// lm-eval's mean_stderr of 0/1 (or any) values; NaN for fewer than two.
double mean_stderr(const std::vector<double>& values);

}  // namespace xsagpt::eval
