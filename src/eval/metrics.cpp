#include "eval/metrics.h"

#include "eval/request_split.h"

#include <stdexcept>

namespace xsagpt::eval {

static size_t first_argmax(const std::vector<double>& v) {
  size_t best = 0;
  for (size_t k = 1; k < v.size(); ++k)
    if (v[k] > v[best]) best = k;
  return best;
}

TaskMetrics multiple_choice_metrics(const McTask& task, const std::vector<std::vector<double>>& logprobs) {
  if (logprobs.size() != task.items.size())
    throw std::invalid_argument("multiple_choice_metrics: one list of log-probabilities per item expected");
  TaskMetrics m;
  for (size_t i = 0; i < task.items.size(); ++i) {
    const auto& item = task.items[i];
    const auto& lp = logprobs[i];
    if (lp.size() != item.endings.size())
      throw std::invalid_argument("multiple_choice_metrics: one log-probability per ending expected");
    std::vector<double> norm(lp.size());
    for (size_t k = 0; k < lp.size(); ++k) norm[k] = lp[k] / static_cast<double>(code_points(item.endings[k]));
    const auto label = static_cast<size_t>(item.label);
    m.acc += first_argmax(lp) == label;
    m.acc_norm += first_argmax(norm) == label;
  }
  m.n = static_cast<int64_t>(task.items.size());
  if (m.n > 0) {
    m.acc /= static_cast<double>(m.n);
    m.acc_norm /= static_cast<double>(m.n);
  }
  return m;
}

}  // namespace xsagpt::eval
