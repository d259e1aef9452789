// Tables as text (see text_table.h).
#include "sweep/text_table.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

namespace xsagpt {

std::string aligned(const TextTable& t) {
  std::vector<size_t> w(t.head.size(), 0);
  auto widen = [&](const TableRow& r) {
    for (size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], r[i].size());
  };
  widen(t.head);
  for (const auto& r : t.rows) widen(r);
  std::string out;
  auto line = [&](const TableRow& r) {
    std::string l;
    for (size_t i = 0; i < r.size(); ++i) l += (i ? "  " : "") + fmt::format("{:<{}}", r[i], i < w.size() ? w[i] : 0);
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l + "\n";
  };
  line(t.head);
  for (const auto& r : t.rows) line(r);
  return out;
}

std::string markdown(const TextTable& t) {
  std::string out = "| " + fmt::format("{}", fmt::join(t.head, " | ")) + " |\n|";
  for (size_t i = 0; i < t.head.size(); ++i) out += i ? "---:|" : "---|";
  out += "\n";
  for (const auto& r : t.rows) out += "| " + fmt::format("{}", fmt::join(r, " | ")) + " |\n";
  return out;
}

std::string bounded_fixed(double x, int decimals, bool sign) {
  const bool bounded = !std::isfinite(x) || std::abs(x) < 1e6;
  if (bounded) return sign ? fmt::format("{:+.{}f}", x, decimals) : fmt::format("{:.{}f}", x, decimals);
  return sign ? fmt::format("{:+.3e}", x) : fmt::format("{:.3e}", x);
}

}  // namespace xsagpt
