// Sweeps, who trains a point: one lock per point, so that any number of processes
// (whole sweeps and single points, on one machine or many sharing the sweep directory
// over NFS) train each point exactly once. flock does not reach across machines on
// every NFS mount and SQLite breaks under parallel writers there, so the lock is built
// from the two operations NFS makes atomic: creating a file by link(2) and rename(2).
//
// A point's lock is a folder, <sweep>/.locks/<point>/, of numbered generations,
// 000000000000.json, 000000000001.json, ...; the highest one present says who holds
// the point: its host, pid, job id (Slurm's, when set), since when, and a heartbeat
// the holder rewrites (by rename) every few seconds while it trains. A process takes
// the point by creating the next generation with link(2), which exactly one creator
// wins, and only:
//   - when there is none yet;
//   - when the highest is released (its holder finished with the point);
//   - when the highest is stale: its heartbeat is older than the staleness threshold,
//     or its holder ran on this machine (same host and boot) and its pid is gone.
// A live holder is refused by name. Two processes taking over one stale lock at once
// both try to create the same next generation, and one of them wins. The winner
// removes the generations below its own; a holder whose heartbeat finds a higher
// generation than its own has lost the point (it stalled past the threshold) and says
// so. Heartbeats are compared with the reader's clock: machines sharing a sweep
// directory need clocks that agree to well within the threshold (NTP does).
//
// The threshold is XSAGPT_POINT_LOCK_STALE_S seconds (default 300); the heartbeat
// comes every fifth of it, at most every 30 s.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

namespace xsagpt {

struct PointLockTiming {
  double stale_s = 300;     // a heartbeat older than this is a dead holder's
  double heartbeat_s = 30;  // how often a holder rewrites its heartbeat
};

// From XSAGPT_POINT_LOCK_STALE_S (seconds, a positive number; ConfigError naming the
// variable otherwise), or the defaults.
PointLockTiming point_lock_timing();

// What a generation file says about its holder.
struct PointHolder {
  int64_t generation = 0;
  std::string host, boot_id, job, token, since;
  int64_t pid = 0;
  double heartbeat = 0;  // seconds since the epoch, by the holder's clock
  bool released = false;

  static PointHolder of(const nlohmann::json& j, int64_t generation);
  nlohmann::json to_json() const;
  // "pid 12 on host h (job 34_5), since 2026-01-01T00:00:00Z"
  std::string describe() const;
};

// This process as a holder: host, boot id, pid, and the job id from SLURM_ARRAY_JOB_ID
// and SLURM_ARRAY_TASK_ID ("<array>_<task>"), else SLURM_JOB_ID, else "".
PointHolder this_process();

// The lock's folder for a point under a sweep directory.
std::filesystem::path point_lock_dir(const std::filesystem::path& sweep_dir, const std::string& point);

// The holder named by the highest generation in `dir`, if any (released or not).
std::optional<PointHolder> read_point_lock(const std::filesystem::path& dir);

// Why `h` no longer holds its point at `now` (seconds since the epoch): "its heartbeat
// is 412 s old", "its process is gone"; nullopt while it is live. Released holders are
// not asked.
std::optional<std::string> stale_reason(const PointHolder& h, const PointLockTiming& timing, double now);

double seconds_now();

class PointLock {
 public:
  struct Attempt {
    std::unique_ptr<PointLock> lock;         // set: this process holds the point
    std::optional<PointHolder> holder;       // not set: who holds it (live)
    std::optional<PointHolder> taken_over;   // set: the stale holder it was taken from
    std::string stale_why;                   // and why it was stale
  };
  // Takes the point's lock in `dir` (created if missing) or says who holds it. Never
  // waits for a live holder. Throws WriteError when the folder cannot be written.
  static Attempt acquire(const std::filesystem::path& dir, const PointLockTiming& timing);

  ~PointLock();  // stops the heartbeat and marks the generation released
  PointLock(const PointLock&) = delete;
  PointLock& operator=(const PointLock&) = delete;

  // Set once a heartbeat found that another process took the point over.
  bool lost() const { return lost_->load(); }
  const PointHolder& holder() const { return me_; }

 private:
  struct Beat;
  PointLock(std::filesystem::path dir, PointHolder me, const PointLockTiming& timing);

  std::filesystem::path dir_;
  PointHolder me_;
  std::shared_ptr<std::atomic<bool>> lost_;
  std::unique_ptr<Beat> beat_;
};

}  // namespace xsagpt
