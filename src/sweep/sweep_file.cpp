// The sweep file's key tables for the docs, from the declared sections (see sweep_file.h).
#include "sweep/sweep_file.h"

#include <fmt/format.h>

namespace xsagpt {

namespace {

struct SectionRows {
  SweepFileSectionName name;
  std::string (*rows)(const std::string& prefix);
};

const std::vector<SectionRows>& section_rows() {
  static const std::vector<SectionRows> table{
      {{"sweep", ""}, file_keys::reference_rows<SweepFileSection>},
      {{"ladder", "ladder."}, file_keys::reference_rows<LadderSection>},
      {{"rung", "ladder.rungs[i]."}, file_keys::reference_rows<RungSection>},
      {{"tokens", "ladder.tokens."}, file_keys::reference_rows<TokensSection>},
      {{"lr", "ladder.lr."}, file_keys::reference_rows<LrSection>},
      {{"anchor", "ladder.lr.anchor."}, file_keys::reference_rows<AnchorSection>},
      {{"estimate", "ladder.estimate."}, file_keys::reference_rows<EstimateSection>},
      {{"slurm", "slurm."}, file_keys::reference_rows<SlurmSection>},
  };
  return table;
}

}  // namespace

const std::vector<SweepFileSectionName>& sweep_file_sections() {
  static const std::vector<SweepFileSectionName> names = [] {
    std::vector<SweepFileSectionName> out;
    for (const auto& s : section_rows()) out.push_back(s.name);
    return out;
  }();
  return names;
}

std::string sweep_file_reference(const std::string& section) {
  std::string names;
  for (const auto& s : section_rows()) {
    if (section == s.name.name)
      return "| key | type | default | meaning |\n|---|---|---|---|\n" + s.rows(s.name.prefix);
    names += (names.empty() ? "" : ", ") + std::string(s.name.name);
  }
  throw ConfigError(fmt::format("--sweep: expected a section of the sweep file ({}), got \"{}\"", names, section));
}

}  // namespace xsagpt
