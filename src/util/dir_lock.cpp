// Directory ownership between processes: an OFD lock on dir/.lock, and claiming a new
// directory by creating it (see dir_lock.h).
#include "util/dir_lock.h"

#include "util/atomic_file.h"
#include "util/json_read.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <utility>

namespace xsagpt {

namespace fs = std::filesystem;

namespace {

std::string lock_host_name() {
  char buf[256] = {};
  return ::gethostname(buf, sizeof buf - 1) == 0 ? std::string(buf) : std::string("unknown host");
}

// "pid 12 on host h (xsagpt train), since ..." from what the holder wrote into its
// lock file; "another process" when it wrote nothing readable (yet).
std::string lock_holder(int fd) {
  std::string text(4096, '\0');
  const ssize_t n = ::pread(fd, text.data(), text.size(), 0);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  const auto holder = parse_json_or_discarded(text);
  if (!holder.is_object() || !holder.contains("pid") || !holder.contains("host")) return "another process";
  auto str = [&](const char* key) {
    return holder[key].is_string() ? holder[key].get<std::string>() : holder[key].dump();
  };
  return fmt::format("pid {} on host {}{}{}", holder["pid"].dump(), str("host"),
                     holder.contains("command") ? " (xsagpt " + str("command") + ")" : "",
                     holder.contains("since") ? ", since " + str("since") : "");
}

// The whole file, for writing: what a holder takes and a question asks about.
struct flock whole_file(short type) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = 0;
  fl.l_len = 0;
  return fl;
}

std::string holder_of(const fs::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "another process";
  auto who = lock_holder(fd);
  ::close(fd);
  return who;
}

}  // namespace

DirLock DirLock::acquire(const fs::path& dir, const std::string& command, const BusyMessage& busy) {
  const fs::path file = dir / ".lock";
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw ConfigError(errno_message(file, "cannot open the lock file"));
  auto fl = whole_file(F_WRLCK);
  if (::fcntl(fd, F_OFD_SETLK, &fl) != 0) {
    const int err = errno;
    if (err != EAGAIN && err != EACCES && err != EINTR) {
      ::close(fd);
      errno = err;
      spdlog::warn("{}; a second process in {} would not be detected", errno_message(file, "cannot lock"),
                   dir.string());
      return {};
    }
    const auto who = lock_holder(fd);
    ::close(fd);
    throw DirBusy(busy(who));
  }
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char since[32] = {};
  std::strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  const std::string text =
      nlohmann::json{{"pid", ::getpid()}, {"host", lock_host_name()}, {"command", command}, {"since", since}}.dump() +
      "\n";
  // Best effort: the lock, not this text, is what keeps a second process out.
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) < 0)
    spdlog::warn("{} (the lock is held; a second process's message will not name this one)",
                 errno_message(file, "cannot record the lock's holder"));
  DirLock lock;
  lock.fd_ = fd;
  return lock;
}

DirLock DirLock::create(const fs::path& dir, const std::string& command, const BusyMessage& busy) {
  if (const auto parent = dir.parent_path(); !parent.empty()) fs::create_directories(parent);
  if (::mkdir(dir.c_str(), 0755) != 0) {
    if (errno != EEXIST) throw ConfigError(errno_message(dir, "cannot create the directory"));
    // Made by someone else since this process looked: theirs, even where they have
    // not locked it yet.
    throw DirBusy(busy(holder_of(dir / ".lock")));
  }
  return acquire(dir, command, busy);
}

std::optional<std::string> DirLock::holder(const fs::path& dir) {
  const fs::path file = dir / ".lock";
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::nullopt;  // no lock file: nobody ever held the directory
  auto fl = whole_file(F_WRLCK);
  std::optional<std::string> who;
  if (::fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK) who = lock_holder(fd);
  ::close(fd);
  return who;
}

DirLock::DirLock(DirLock&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}

DirLock& DirLock::operator=(DirLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the only descriptor releases the lock
}

}  // namespace xsagpt
