// Multiple-choice accuracy as lm-evaluation-harness defines it:
//   acc       the ending with the highest summed log-probability is the label;
//   acc_norm  the same after dividing each ending's log-probability by its length
//             in characters (Unicode code points, Python's len) as written.
// Ties go to the first ending (numpy's argmax).
#pragma once

#include "eval/task_file.h"

#include <vector>

namespace xsagpt::eval {

struct TaskMetrics {
  double acc = 0, acc_norm = 0;
  int64_t n = 0;  // items
};

// logprobs[i][k]: log-probability of ending k of item i.
TaskMetrics multiple_choice_metrics(const McTask& task, const std::vector<std::vector<double>>& logprobs);

}  // namespace xsagpt::eval
