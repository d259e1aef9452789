// Sweeps, the tables of their reports: rows of cells, as aligned columns for a
// terminal and as a markdown table (first column left, the others right-aligned).
#pragma once

#include <string>
#include <vector>

namespace xsagpt {

using TableRow = std::vector<std::string>;

struct TextTable {
  std::string title;
  TableRow head;
  std::vector<TableRow> rows;
};

std::string aligned(const TextTable& t);
std::string markdown(const TextTable& t);

// A number for a table or a note: fixed point with `decimals` decimals (and a sign when
// `sign`) while it is bounded (|x| < 1e6, where fixed point is at most a few characters
// wider), scientific beyond, so a diverged loss of 1e308 is "1.000e+308", not 309
// digits; "nan" and "inf" as fmt writes them. Every loss, difference and ratio the
// sweep's reports print goes through this.
std::string bounded_fixed(double x, int decimals, bool sign = false);

}  // namespace xsagpt
