// A run's median time per step from its train records (sweep/step_time.h).
#include "sweep/step_time.h"

#include "util/regular_file.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace xsagpt {

std::optional<double> median_step_time(const std::filesystem::path& metrics) {
  // Every record with a step and a time marks where training stood; an evaluation's is
  // written once it has finished, so an interval from it to the next train record holds
  // training alone. That also gives a run shorter than its log interval one interval:
  // from the evaluation at step 0 to the train record at its end.
  struct Mark {
    double step, time_s;
    bool train;
  };
  auto in = open_state_file(metrics);
  std::vector<Mark> marks;
  for (std::string line; std::getline(in, line);) {
    const auto r = nlohmann::json::parse(line, nullptr, false);
    if (!r.is_object() || !r.value("step", nlohmann::json()).is_number() ||
        !r.value("time_s", nlohmann::json()).is_number())
      continue;
    const bool train = r.value("train_loss", nlohmann::json()).is_number() &&
                       !r.value("val_loss", nlohmann::json()).is_number();
    const double step = r["step"].get<double>();
    if (step < 0) continue;
    // A restart: its records replace those at or after its step (a train record at a step
    // already trained, or any record before the last one's step).
    while (!marks.empty() && (marks.back().step > step || (train && marks.back().step >= step))) marks.pop_back();
    marks.push_back({step, r["time_s"].get<double>(), train});
  }
  std::vector<double> per_step;
  for (size_t i = 1; i < marks.size(); ++i) {
    if (!marks[i].train) continue;
    const double steps = marks[i].step - marks[i - 1].step, seconds = marks[i].time_s - marks[i - 1].time_s;
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
