// Holm's step-down adjustment (stats/holm.h).
#include "stats/holm.h"

#include "util/error.h"

#include <fmt/format.h>

#include <algorithm>

namespace xsagpt {

size_t holm_family_size(const std::vector<std::optional<double>>& p) {
  return static_cast<size_t>(std::count_if(p.begin(), p.end(), [](const auto& x) { return x.has_value(); }));
}

std::vector<std::optional<double>> holm_adjust(const std::vector<std::optional<double>>& p) {
  std::vector<size_t> order;
  for (size_t i = 0; i < p.size(); ++i) {
    if (!p[i]) continue;
    if (!(*p[i] >= 0 && *p[i] <= 1))
      throw ConfigError(fmt::format("Holm's adjustment: p-value {} is {}, not in [0, 1]", i, *p[i]));
    order.push_back(i);
  }
  // Stable: tied raw values keep their order, and the running maximum gives them one value.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return *p[a] < *p[b]; });
  std::vector<std::optional<double>> out(p.size());
  const double m = static_cast<double>(order.size());
  double running = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    running = std::max(running, std::min(1.0, (m - static_cast<double>(k)) * *p[order[k]]));
    out[order[k]] = running;
  }
  return out;
}

void holm_across(const std::vector<nlohmann::json*>& tests, const std::string& p_key) {
  std::vector<std::optional<double>> p;
  for (const nlohmann::json* t : tests) {
    const auto v = t->value(p_key, nlohmann::json());
    p.push_back(v.is_number() ? std::optional<double>(v.get<double>()) : std::nullopt);
  }
  const auto adjusted = holm_adjust(p);
  const size_t m = holm_family_size(p);
  for (size_t i = 0; i < tests.size(); ++i) {
    (*tests[i])[p_key + "_holm"] = adjusted[i] ? nlohmann::json(*adjusted[i]) : nlohmann::json(nullptr);
    (*tests[i])["holm_m"] = m;
  }
}

}  // namespace xsagpt
