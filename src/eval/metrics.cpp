#include "eval/metrics.h"

#include "eval/request_split.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace xsagpt::eval {

namespace {

size_t first_argmax(const std::vector<double>& v) {
  size_t best = 0;
  for (size_t k = 1; k < v.size(); ++k)
    if (v[k] > v[best]) best = k;
  return best;
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0.0 : s / static_cast<double>(v.size());
}

}  // namespace

double mean_stderr(const std::vector<double>& values) {
  const auto n = static_cast<double>(values.size());
  if (values.size() < 2) return std::numeric_limits<double>::quiet_NaN();
  const double mu = mean(values);
  double ss = 0;
  for (double x : values) ss += (x - mu) * (x - mu);
  return std::sqrt(ss / (n - 1)) / std::sqrt(n);
}

TaskMetrics task_metrics(const McTask& task, const std::vector<std::vector<ChoiceScore>>& scores) {
  if (scores.size() != task.items.size())
    throw std::invalid_argument("task_metrics: one list of scores per item expected");
  std::vector<double> acc, acc_norm, ll;
  for (size_t i = 0; i < task.items.size(); ++i) {
    const auto& item = task.items[i];
    const auto& s = scores[i];
    if (s.size() != item.requests().size()) throw std::invalid_argument("task_metrics: one score per request expected");
    if (item.shape == ItemShape::kGreedy) {
      acc.push_back(s[0].is_greedy ? 1.0 : 0.0);
      ll.push_back(s[0].logprob);
      continue;
    }
    const auto& choices = item.choices();
    std::vector<double> lp(s.size()), norm(s.size());
    for (size_t k = 0; k < s.size(); ++k) {
      lp[k] = s[k].logprob;
      norm[k] = s[k].logprob / static_cast<double>(code_points(choices[k]));
    }
    const auto label = static_cast<size_t>(item.label);
    acc.push_back(first_argmax(lp) == label ? 1.0 : 0.0);
    acc_norm.push_back(first_argmax(norm) == label ? 1.0 : 0.0);
  }
  TaskMetrics m;
  m.n = static_cast<int64_t>(task.items.size());
  m.acc = mean(acc);
  m.acc_stderr = mean_stderr(acc);
  if (task.shape == ItemShape::kGreedy) {
    m.has_perplexity = true;
    m.perplexity = std::exp(-mean(ll));
  } else {
    m.has_norm = true;
    m.acc_norm = mean(acc_norm);
    m.acc_norm_stderr = mean_stderr(acc_norm);
  }
  return m;
}

}  // namespace xsagpt::eval
