// Atomic whole-file writes (see atomic_file.h).
#include "util/atomic_file.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>
#include <atomic>
#include <cerrno>
#include <cstring>

namespace xsagpt {

namespace fs = std::filesystem;

std::string errno_message(const fs::path& path, const char* what) {
  return fmt::format("{}: {}: {}", path.string(), what, std::strerror(errno));
}

void fsync_dir(const fs::path& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

namespace {

// Writes `text` to a new file `tmp` and flushes it to disk; returns why not, or "".
std::string write_flushed(const fs::path& tmp, const fs::path& path, const std::string& text) {
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw WriteError(errno_message(tmp, "cannot create"));
  std::string error;
  for (size_t done = 0; done < text.size() && error.empty();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = ENOSPC;
      error = errno_message(path, "cannot write");
    } else {
      done += static_cast<size_t>(n);
    }
  }
  if (error.empty() && ::fsync(fd) != 0) error = errno_message(path, "cannot write (fsync)");
  if (::close(fd) != 0 && error.empty()) error = errno_message(path, "cannot write (close)");
  return error;
}

void replace_through(const fs::path& tmp, const fs::path& path, const std::string& text) {
  auto error = write_flushed(tmp, path, text);
  if (error.empty() && ::rename(tmp.c_str(), path.c_str()) != 0)
    error = errno_message(path, "cannot rename the new file into place");
  if (!error.empty()) {
    ::unlink(tmp.c_str());
    throw WriteError(error + (fs::exists(path) ? "; the previous file is unchanged" : ""));
  }
  fsync_dir(path.parent_path());
}

}  // namespace

fs::path private_temporary(const fs::path& path) {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = 0;
  // A counter too: two threads of one process (or two calls) never share a temporary.
  static std::atomic<uint64_t> calls{0};
  return fmt::format("{}.{}.{}.{}.tmp", path.string(), host, ::getpid(), calls.fetch_add(1));
}

void write_file_atomic(const fs::path& path, const std::string& text) {
  replace_through(path.string() + ".tmp", path, text);
}

void write_file_atomic_shared(const fs::path& path, const std::string& text) {
  replace_through(private_temporary(path), path, text);
}

bool create_file_exclusive(const fs::path& path, const std::string& text) {
  const auto tmp = private_temporary(path);
  auto error = write_flushed(tmp, path, text);
  if (!error.empty()) {
    ::unlink(tmp.c_str());
    throw WriteError(error);
  }
  const bool made = ::link(tmp.c_str(), path.c_str()) == 0;
  const int err = errno;
  ::unlink(tmp.c_str());
  if (!made && err != EEXIST) {
    errno = err;
    throw WriteError(errno_message(path, "cannot create"));
  }
  if (made) fsync_dir(path.parent_path());
  return made;
}

}  // namespace xsagpt
