// A sweep point's lock (sweep/point_lock.h): one holder at a time, a live holder
// refused by name, a released or stale one taken over, exactly one winner among
// processes taking over at once, the heartbeat, a holder that lost its point; and
// staleness by the file system's clock alone: holders whose clocks run an hour ahead or
// behind, a heartbeat recorded in the future, a lock file stamped in the future, and a
// holder that stopped beating but still holds its run directory.
#include "helpers.h"
#include "sweep/point_lock.h"
#include "util/atomic_file.h"
#include "util/dir_lock.h"
#include "util/error.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <vector>

using namespace xsagpt;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

class PointLocks : public test::TempDirTest {
 protected:
  fs::path dir() const { return point_lock_dir(tmp, "sa,train.seed=1"); }
  fs::path run_dir() const { return tmp / "sa,train.seed=1"; }
  fs::path gen(int g) const { return dir() / fmt::format("{:012d}.json", g); }
  std::vector<std::string> files() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir())) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  // A holder's file written as another process (elsewhere) writes it, by rename: its
  // heartbeat recorded by its own clock, the file stamped by the file system's.
  static json holder_json(const std::string& host, double heartbeat, int64_t pid = 4242) {
    return {{"host", host},     {"pid", pid},          {"job", "77_3"},          {"token", "t"},
            {"since", "2026-01-01T00:00:00Z"}, {"heartbeat", heartbeat}, {"released", false}};
  }
  void plant(int g, const std::string& host, double heartbeat, int64_t pid = 4242) const {
    fs::create_directories(dir());
    write_file_atomic_shared(gen(g), holder_json(host, heartbeat, pid).dump());
  }
  // The file system's stamp on a generation moved by `seconds` (below 0: into the past).
  void restamp(int g, double seconds) const {
    fs::last_write_time(gen(g), fs::last_write_time(gen(g)) +
                                    std::chrono::duration_cast<fs::file_time_type::duration>(
                                        std::chrono::duration<double>(seconds)));
  }
  json read(int g) const { return json::parse(std::ifstream(gen(g))); }
  PointLock::Attempt acquire(const PointLockTiming& t = quick()) const {
    return PointLock::acquire(dir(), t, run_dir());
  }
  static PointLockTiming quick() { return {300, 0.02}; }
};

namespace {

// Polls `ok` for up to 60 s: what a heartbeat thread does shows within a few periods.
template <class F>
bool eventually(F ok) {
  for (int i = 0; i < 6000; ++i) {
    if (ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return ok();
}

}  // namespace

TEST_F(PointLocks, OneHolderAtATimeAndALiveOneIsNamed) {
  auto first = acquire();
  ASSERT_TRUE(first.lock);
  EXPECT_FALSE(first.holder || first.taken_over);
  EXPECT_EQ(files(), std::vector<std::string>{"000000000000.json"});
  EXPECT_EQ(read(0)["pid"], ::getpid());
  EXPECT_EQ(read(0)["released"], false);

  auto second = acquire();  // this very process is alive and beating
  EXPECT_FALSE(second.lock);
  ASSERT_TRUE(second.holder);
  EXPECT_EQ(second.holder->pid, ::getpid());
  EXPECT_THAT(second.holder->describe(), HasSubstr(fmt::format("pid {} on host ", ::getpid())));
  EXPECT_EQ(files(), std::vector<std::string>{"000000000000.json"});  // a refusal leaves no file, its probe included
}

TEST_F(PointLocks, AReleasedLockIsTakenByTheNextGenerationWithoutATakeOver) {
  { auto a = acquire(); ASSERT_TRUE(a.lock); }
  EXPECT_EQ(read(0)["released"], true);
  auto b = acquire();
  ASSERT_TRUE(b.lock);
  EXPECT_FALSE(b.taken_over);
  EXPECT_EQ(files(), std::vector<std::string>{"000000000001.json"});  // the ones below it are removed
}

TEST_F(PointLocks, ALiveHolderElsewhereIsRefusedByNameAStaleOneIsTakenOver) {
  plant(0, "node-b", seconds_now());
  auto refused = acquire();
  EXPECT_FALSE(refused.lock);
  ASSERT_TRUE(refused.holder);
  EXPECT_EQ(refused.holder->describe(), "pid 4242 on host node-b (job 77_3), since 2026-01-01T00:00:00Z");

  restamp(0, -301);  // its file last written 301 s ago, by the file system's clock
  auto taken = acquire();
  ASSERT_TRUE(taken.lock);
  ASSERT_TRUE(taken.taken_over);
  EXPECT_EQ(taken.taken_over->host, "node-b");
  EXPECT_THAT(taken.stale_why, HasSubstr("its last heartbeat is 301 s old (stale after 300 s)"));
  EXPECT_EQ(files(), std::vector<std::string>{"000000000001.json"});
  EXPECT_EQ(read(1)["pid"], ::getpid());
}

// Holders whose clocks run an hour ahead and an hour behind this one's, each beating (its
// file rewritten every 20 ms with the time by its clock) on a 1 s threshold: neither is
// evicted while it beats, and both are taken over once they stop. Before, the one behind
// was evicted at once ("3600 s old") and the one ahead held the point for ever ("0 s ago").
TEST_F(PointLocks, HoldersWhoseClocksRunAnHourAheadOrBehindAreJudgedByTheFileSystemsClockAlone) {
  const PointLockTiming t{1.0, 0.2};
  for (const double skew : {3600.0, -3600.0}) {
    SCOPED_TRACE(skew);
    test::remove_tree(dir());
    std::atomic<bool> beating{true};
    plant(0, "node-b", seconds_now() + skew);
    std::thread holder([&] {
      while (beating) {
        plant(0, "node-b", seconds_now() + skew);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
    for (int i = 0; i < 15; ++i) {  // 1.5 s of asking: past the threshold, while it beats
      const auto a = acquire(t);
      EXPECT_FALSE(a.lock) << a.stale_why;
      ASSERT_TRUE(a.holder);
      EXPECT_EQ(a.holder->host, "node-b");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    beating = false;
    holder.join();
    EXPECT_FALSE(acquire(t).lock);  // just stopped: not yet past the threshold
    std::this_thread::sleep_for(std::chrono::milliseconds(1300));
    const auto taken = acquire(t);
    ASSERT_TRUE(taken.lock);
    EXPECT_THAT(taken.stale_why, HasSubstr("(stale after 1 s)"));
  }
}

// A heartbeat recorded in the future (a clock far ahead, or a file edited by hand) holds the
// point no longer than any other: its file's stamp goes stale. Before: "last heartbeat 0 s
// ago" for ever.
TEST_F(PointLocks, AHeartbeatRecordedInTheFutureDoesNotHoldThePointForEver) {
  plant(0, "node-b", seconds_now() + 1e6);
  EXPECT_FALSE(acquire().lock);
  restamp(0, -400);
  const auto taken = acquire();
  ASSERT_TRUE(taken.lock);
  EXPECT_THAT(taken.stale_why, HasSubstr("its last heartbeat is 400 s old"));
}

// A lock file whose stamp lies past the threshold in the future was not written by a
// heartbeat (a live one restamps its file every few seconds): stale, like an old one.
TEST_F(PointLocks, ALockFileStampedInTheFutureIsStale) {
  plant(0, "node-b", seconds_now());
  restamp(0, 86400);
  const auto taken = acquire();
  ASSERT_TRUE(taken.lock);
  EXPECT_THAT(taken.stale_why, HasSubstr("its lock file is stamped 86400 s in the future, which no heartbeat does"));
}

// A holder whose heartbeat stopped but whose process still holds the point's run directory
// (stopped by SIGSTOP, suspended, stalled) is alive: refused by name, never taken over, and
// --status's check says why. Once the run directory is free it goes stale as any other.
TEST_F(PointLocks, AHolderThatStoppedBeatingButStillHoldsItsRunDirectoryKeepsThePoint) {
  plant(0, "node-b", seconds_now());
  restamp(0, -1000);
  fs::create_directories(run_dir());
  {
    const auto running = DirLock::acquire(run_dir(), "train", [](const std::string& h) { return h; });
    ASSERT_TRUE(running.held());
    const auto a = acquire();
    EXPECT_FALSE(a.lock);
    ASSERT_TRUE(a.holder);
    EXPECT_TRUE(a.holder_check.live);
    EXPECT_NEAR(a.holder_check.age, 1000, 5);
    EXPECT_THAT(a.holder_check.why, HasSubstr("its heartbeat stopped past the 300 s threshold, but pid "));
    EXPECT_THAT(a.holder_check.why, HasSubstr("still holds its run directory"));
    EXPECT_EQ(files(), std::vector<std::string>{"000000000000.json"});
    ASSERT_TRUE(DirLock::holder(run_dir()));
    EXPECT_THAT(a.holder_check.why, HasSubstr(*DirLock::holder(run_dir())));
  }
  EXPECT_FALSE(DirLock::holder(run_dir()));  // released with the lock, and asking took nothing
  const auto taken = acquire();
  ASSERT_TRUE(taken.lock);
  EXPECT_THAT(taken.stale_why, HasSubstr("its last heartbeat is 1000 s old"));
}

TEST_F(PointLocks, AHolderWhoseProcessIsGoneFromThisMachineIsTakenOverAtOnce) {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);  // reaped: its pid names no process now
  const auto me = this_process();
  fs::create_directories(dir());
  std::ofstream(gen(0)) << json{{"host", me.host}, {"boot_id", me.boot_id}, {"pid", child},
                                {"heartbeat", seconds_now()}, {"released", false}}
                               .dump();
  auto taken = acquire();
  ASSERT_TRUE(taken.lock);
  EXPECT_THAT(taken.stale_why, HasSubstr(fmt::format("its process (pid {}) is gone from this machine", child)));
}

TEST_F(PointLocks, ADamagedLockFileGoesStaleByItsModificationTime) {
  fs::create_directories(dir());
  std::ofstream(gen(3)) << "{\"pid\": 1, \"heart";
  EXPECT_FALSE(acquire().lock);  // just written: live for now
  restamp(3, -3600);
  auto taken = acquire();
  ASSERT_TRUE(taken.lock);
  EXPECT_EQ(taken.lock->holder().generation, 4);
}

// Many takers of one stale lock at once: one wins the next generation, every other
// one finds it held.
TEST_F(PointLocks, TakersOfOneStaleLockAtOnceLeaveExactlyOneHolder) {
  plant(0, "node-b", seconds_now());
  restamp(0, -1000);
  std::vector<PointLock::Attempt> attempts(8);
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (auto& a : attempts)
    threads.emplace_back([&] {
      while (!go) std::this_thread::yield();
      a = acquire();
    });
  go = true;
  for (auto& t : threads) t.join();
  int holders = 0, refused = 0;
  for (const auto& a : attempts) {
    holders += a.lock != nullptr;
    refused += a.holder.has_value();
  }
  EXPECT_EQ(holders, 1);
  EXPECT_EQ(refused, 7);
  EXPECT_EQ(files(), std::vector<std::string>{"000000000001.json"});
}

TEST_F(PointLocks, TheHeartbeatAdvancesAndAHolderOvertakenLearnsItLost) {
  auto a = acquire();
  ASSERT_TRUE(a.lock);
  const double first = read(0)["heartbeat"].get<double>();
  EXPECT_TRUE(eventually([&] { return read(0)["heartbeat"].get<double>() > first; }));
  EXPECT_FALSE(a.lock->lost());
  EXPECT_TRUE(a.lock->held());
  plant(1, "node-b", seconds_now());  // taken over by another machine that judged it stale
  EXPECT_FALSE(a.lock->held());       // asked before a write: at once, not at the next heartbeat
  EXPECT_TRUE(a.lock->lost());
  a.lock.reset();
  EXPECT_EQ(read(1)["host"], "node-b");  // the loser leaves the winner's generation alone
}

TEST_F(PointLocks, TheStalenessThresholdComesFromTheEnvironment) {
  ::setenv("XSAGPT_POINT_LOCK_STALE_S", "2", 1);
  const auto t = point_lock_timing();
  EXPECT_EQ(t.stale_s, 2);
  EXPECT_EQ(t.heartbeat_s, 0.4);
  for (const char* bad : {"abc", "0", "-3", "5s", ""}) {
    ::setenv("XSAGPT_POINT_LOCK_STALE_S", bad, 1);
    EXPECT_THAT(test::error_of<ConfigError>([] { point_lock_timing(); }),
                HasSubstr(fmt::format("XSAGPT_POINT_LOCK_STALE_S: expected a positive number of seconds, got \"{}\"",
                                      bad)));
  }
  ::unsetenv("XSAGPT_POINT_LOCK_STALE_S");
  EXPECT_EQ(point_lock_timing().stale_s, 300);
}
