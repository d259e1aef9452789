// State files opened only when regular (see regular_file.h).
#include "util/regular_file.h"

#include "util/error.h"

namespace xsagpt {

namespace fs = std::filesystem;

std::string not_a_regular_file(const fs::path& path) {
  std::error_code ec;
  switch (fs::status(path, ec).type()) {
    case fs::file_type::regular:
    case fs::file_type::not_found:
    case fs::file_type::none: return "";
    case fs::file_type::directory: return "a directory";
    case fs::file_type::fifo: return "a FIFO";
    case fs::file_type::socket: return "a socket";
    case fs::file_type::block: return "a block device";
    case fs::file_type::character: return "a character device";
    default: return "no regular file";
  }
}

std::ifstream open_state_file(const fs::path& path, std::ios::openmode mode) {
  if (const auto what = not_a_regular_file(path); !what.empty())
    throw ConfigError(path.string() + ": is " + what + ", expected a regular file (remove it, or put the file back)");
  return std::ifstream(path, mode);
}

}  // namespace xsagpt
