// A run's median time per step from its train records (sweep/step_time.h).
#include "sweep/step_time.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace xsagpt {

std::optional<double> median_step_time(const std::filesystem::path& metrics) {
  std::ifstream in(metrics);
  std::vector<std::pair<double, double>> train;  // step, time_s
  for (std::string line; std::getline(in, line);) {
    const auto r = nlohmann::json::parse(line, nullptr, false);
    if (!r.is_object() || !r.value("step", nlohmann::json()).is_number() ||
        !r.value("time_s", nlohmann::json()).is_number() || !r.value("train_loss", nlohmann::json()).is_number() ||
        r.value("val_loss", nlohmann::json()).is_number())
      continue;
    const double step = r["step"].get<double>();
    if (step < 0) continue;
    while (!train.empty() && train.back().first >= step) train.pop_back();
    train.emplace_back(step, r["time_s"].get<double>());
  }
  std::vector<double> per_step;
  for (size_t i = 1; i < train.size(); ++i) {
    const double steps = train[i].first - train[i - 1].first, seconds = train[i].second - train[i - 1].second;
    if (steps > 0 && seconds > 0) per_step.push_back(seconds / steps);
  }
  if (per_step.empty()) return std::nullopt;
  const size_t mid = per_step.size() / 2;
  std::nth_element(per_step.begin(), per_step.begin() + static_cast<std::ptrdiff_t>(mid), per_step.end());
  const double upper = per_step[mid];
  if (per_step.size() % 2 == 1) return upper;
  const double lower = *std::max_element(per_step.begin(), per_step.begin() + static_cast<std::ptrdiff_t>(mid));
  return 0.5 * (lower + upper);
}

}  // namespace xsagpt
