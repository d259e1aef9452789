#include "util/paths.h"

namespace xsagpt {

namespace fs = std::filesystem;

std::optional<fs::path> project_root() {
  std::error_code ec;
  auto dir = fs::read_symlink("/proc/self/exe", ec).parent_path();
  if (ec) return std::nullopt;
  for (int up = 0; up < 3 && !dir.empty(); ++up, dir = dir.parent_path())
    if (fs::is_directory(dir / "configs" / "model") && fs::is_directory(dir / "scripts")) return dir;
  return std::nullopt;
}

}  // namespace xsagpt
