// Sweeps, who trains a point: one lock per point, so that any number of processes
// (whole sweeps and single points, on one machine or many sharing the sweep directory
// over NFS) train each point exactly once. flock does not reach across machines on
// every NFS mount and SQLite breaks under parallel writers there, so the lock is built
// from the two operations NFS makes atomic: creating a file by link(2) and rename(2).
//
// A point's lock is a folder, <sweep>/.locks/<point>/, of numbered generations,
// 000000000000.json, 000000000001.json, ...; the highest one present says who holds
// the point: its host, pid, job id (Slurm's, when set), since when, and its heartbeat's
// time by its own clock (for people to read), a file the holder rewrites by rename every
// few seconds while it trains. A process takes the point by creating the next generation
// with link(2), which exactly one creator wins, and only:
//   - when there is none yet;
//   - when the highest is released (its holder finished with the point);
//   - when the highest is stale (below).
// A live holder is refused by name. Two processes taking over one stale lock at once
// both try to create the same next generation, and one of them wins. The winner
// removes the generations below its own.
//
// Staleness never compares one host's clock with another's. Each heartbeat writes a new
// file, which the file system stamps with its own clock (the NFS server's; the kernel's
// on a local disk); a reader asks how old that stamp is by creating a probe file in the
// same folder and reading the probe's stamp (LockClock): both times come from one clock,
// so a holder whose clock runs an hour ahead or behind is judged as any other, and the
// time a holder recorded is shown, never compared. Of the two known designs this one,
// rather than a heartbeat value watched until it stayed unchanged for the threshold on
// the reader's monotonic clock (filelock #738), because the readers here look once: a
// sweep passing a held point, `--status`, `--submit`; watching would hold each of them
// for the whole threshold. A holder is stale
//   - at once, when it ran on this machine (same host and boot) and its pid is gone;
//   - when its file is older than the threshold by the file system's clock, or stamped
//     more than the threshold ahead of the probe, which no heartbeat does (a file touched
//     by hand, a server clock stepped back): a live holder restamps its file every
//     heartbeat, so a stamp in the future holds a point no longer than an old one;
// and in these last two cases only while no live process holds the point's run
// directory (util/dir_lock.h's holder(); a trainer holds it from start to end, across
// machines on NFS with locks): a holder that stopped beating but still holds its run
// (stopped by SIGSTOP or `scontrol suspend`, or stalled) keeps the point, --status says
// so, and once it continues it beats again.
//
// A holder that stalled past the threshold where its run directory could be taken
// anyway (another machine, NFS without locks) may find, once it continues, a higher
// generation than its own: it has lost the point. It asks before each write into the
// point's run (PointLock::held, through TrainOptions::still_held), and once lost it
// writes nothing more there and says so; its heartbeat thread stops at the same finding.
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
  double stale_s = 300;     // a lock file older than this is a dead holder's
  double heartbeat_s = 30;  // how often a holder rewrites its lock file
};

// From XSAGPT_POINT_LOCK_STALE_S (seconds, a positive number; ConfigError naming the
// variable otherwise), or the defaults.
PointLockTiming point_lock_timing();

// What a generation file says about its holder.
struct PointHolder {
  int64_t generation = 0;
  std::string host, boot_id, job, token, since;
  int64_t pid = 0;
  double heartbeat = 0;  // seconds since the epoch, by the holder's clock: shown, never compared
  double stamped = 0;    // the file's modification time, by the file system's clock
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

// "Now" by the clock that stamps a folder's files: the modification time of a probe
// created there (and removed at once). Where the folder cannot be written (a read-only
// mount, a folder not made yet), this host's clock, and `probed` says so.
struct LockClock {
  double now = 0;  // seconds since the epoch
  bool probed = false;
  static LockClock of(const std::filesystem::path& dir);
};

// The holder named by the highest generation in `dir`, if any (released or not).
std::optional<PointHolder> read_point_lock(const std::filesystem::path& dir);

// Whether a holder that has not released its point still holds it (see above).
struct HolderCheck {
  bool live = true;
  double age = 0;   // seconds since its file was written, by the file system's clock (below 0: stamped ahead)
  std::string why;  // stale: "its process (pid 12) is gone from this machine", "its last heartbeat is 412 s
                    // old (stale after 300 s)"; live: "" or why a holder that stopped beating still counts
};
HolderCheck check_holder(const PointHolder& h, const PointLockTiming& timing, const LockClock& clock,
                         const std::filesystem::path& run_dir);

double seconds_now();

class PointLock {
 public:
  struct Attempt {
    std::unique_ptr<PointLock> lock;        // set: this process holds the point
    std::optional<PointHolder> holder;      // not set: who holds it (live)
    HolderCheck holder_check;               // and how it was judged live
    std::optional<PointHolder> taken_over;  // set: the stale holder it was taken from
    std::string stale_why;                  // and why it was stale
  };
  // Takes the point's lock in `dir` (created if missing) or says who holds it, judging a
  // holder against the point's run directory `run_dir`. Never waits for a live holder.
  // Throws WriteError when the folder cannot be written.
  static Attempt acquire(const std::filesystem::path& dir, const PointLockTiming& timing,
                         const std::filesystem::path& run_dir);

  ~PointLock();  // stops the heartbeat and marks the generation released (not once lost)
  PointLock(const PointLock&) = delete;
  PointLock& operator=(const PointLock&) = delete;

  // Whether this process still holds the point, asked of the lock folder now: its
  // generation is still there, its own and the highest. The first `false` says, once,
  // that the point was lost and to whom.
  bool held();
  // Set once a heartbeat or held() found that another process took the point over.
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
