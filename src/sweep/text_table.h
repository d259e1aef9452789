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

}  // namespace xsagpt
