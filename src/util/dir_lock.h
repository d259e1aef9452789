// One owner per directory between processes: an advisory lock on dir/.lock, an open file
// description lock (fcntl F_OFD_SETLK over the whole file), which the kernel releases
// whatever way the holder ends (kill -9 included). The file holds the holder's pid, host,
// command and start time, for the message a second process gets. `train` locks its run
// directory with it, so two processes never write one run's files at once. Unlike
// flock(2), such a lock can be asked about without being taken (F_OFD_GETLK): holder()
// tells whether a live process holds a directory, a stopped (SIGSTOP) one included,
// without the moment's lock that would refuse a trainer starting then. (A sweep's
// points, which several machines may share, have locks of their own: sweep/point_lock.h,
// which asks holder() whether a point whose heartbeat stopped is still being trained.)
//
// A directory that does not exist yet is claimed by creating it: mkdir(2) makes it
// for exactly one process, and any other that finds it there (EEXIST) is refused as
// "in use" without touching it. There is no moment at which two processes both
// believe a new directory is theirs.
//
// On NFS the lock is an NFS byte-range lock, so it holds across machines where the server
// supports locking (NFSv4, NFSv3 with lockd); a mount with `nolock` (or a file system
// without locks) makes it local to one machine. A file system that refuses locks
// altogether gets a warning, and the process goes on unprotected.
#pragma once

#include "util/error.h"

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace xsagpt {

// Another process owns the directory; the message names it and what to do.
struct DirBusy : ConfigError {
  using ConfigError::ConfigError;
};

class DirLock {
 public:
  // Builds the refusal from the holder ("pid 12 on host h, since 2026-01-01T00:00:00Z",
  // or "another process" when its lock file says nothing readable).
  using BusyMessage = std::function<std::string(const std::string& holder)>;

  DirLock() = default;
  // Locks `dir` (which must exist) for `command` ("train", "sweep") without waiting;
  // throws DirBusy(busy(holder)) when another process holds it.
  static DirLock acquire(const std::filesystem::path& dir, const std::string& command, const BusyMessage& busy);
  // Creates `dir` (and its parents) and locks it; throws DirBusy(busy(holder)) when
  // `dir` already exists, whoever made it, or another process took its lock first.
  static DirLock create(const std::filesystem::path& dir, const std::string& command, const BusyMessage& busy);

  // Who holds `dir`'s lock now ("pid 12 on host h (xsagpt train), since ...", or "another
  // process"), asked without taking it; nullopt when nobody does, or `dir` has no lock file.
  static std::optional<std::string> holder(const std::filesystem::path& dir);

  DirLock(DirLock&& o) noexcept;
  DirLock& operator=(DirLock&& o) noexcept;
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  ~DirLock();
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace xsagpt
