// metrics.jsonl written line by line, never left ending mid-line (see metrics.h).
#include "run/metrics.h"

#include "util/atomic_file.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <utility>

namespace xsagpt {

namespace fs = std::filesystem;

MetricsLog::MetricsLog(const fs::path& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw MetricsError(errno_message(path, "cannot open for appending"));
}

MetricsLog::MetricsLog(MetricsLog&& o) noexcept { *this = std::move(o); }

MetricsLog& MetricsLog::operator=(MetricsLog&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    path_ = std::move(o.path_);
  }
  return *this;
}

MetricsLog::~MetricsLog() {
  if (fd_ >= 0) ::close(fd_);
}

void MetricsLog::write(const nlohmann::json& line) {
  if (fd_ < 0) return;
  const std::string text = line.dump() + "\n";
  struct stat st {};
  const off_t before = ::fstat(fd_, &st) == 0 ? st.st_size : -1;
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = ENOSPC;
      std::string why = errno_message(path_, "cannot write");
      if (before >= 0 && done > 0) (void)::ftruncate(fd_, before);  // no half line left behind
      throw MetricsError(why + fmt::format("; the run stops at step {} (its lines up to here and its "
                                           "checkpoints are intact: free space, then --resume auto)",
                                           line.value("step", int64_t{-1})));
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace xsagpt
