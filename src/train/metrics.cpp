#include "train/metrics.h"

#include <string>
#include <vector>

namespace xsagpt {

namespace fs = std::filesystem;

MetricsLog::MetricsLog(const fs::path& path, int64_t resume_step) {
  if (resume_step >= 0 && fs::exists(path)) {
    std::vector<std::string> keep;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_discarded() && j.value("step", int64_t{0}) <= resume_step) keep.push_back(line);
    }
    const auto tmp = path.string() + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      for (const auto& l : keep) out << l << "\n";
    }
    fs::rename(tmp, path);
  }
  out_.open(path, std::ios::app);
  if (!out_) throw std::runtime_error(path.string() + ": cannot open for writing");
}

void MetricsLog::write(const nlohmann::json& line) {
  if (!out_.is_open()) return;
  out_ << line.dump() << "\n";
  out_.flush();
}

}  // namespace xsagpt
