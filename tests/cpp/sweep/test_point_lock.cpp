// A sweep point's lock (sweep/point_lock.h): one holder at a time, a live holder
// refused by name, a released or stale one taken over, exactly one winner among
// processes taking over at once, the heartbeat, and a holder that lost its point.
#include "helpers.h"
#include "sweep/point_lock.h"
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
  fs::path gen(int g) const { return dir() / fmt::format("{:012d}.json", g); }
  std::vector<std::string> files() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir())) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  // A holder's file written by hand, as another process (elsewhere) would have.
  void plant(int g, const std::string& host, double heartbeat, int64_t pid = 4242) const {
    fs::create_directories(dir());
    std::ofstream(gen(g)) << json{{"host", host}, {"pid", pid}, {"job", "77_3"}, {"token", "t"},
                                  {"since", "2026-01-01T00:00:00Z"}, {"heartbeat", heartbeat}, {"released", false}}
                                 .dump();
  }
  json read(int g) const { return json::parse(std::ifstream(gen(g))); }
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
  auto first = PointLock::acquire(dir(), quick());
  ASSERT_TRUE(first.lock);
  EXPECT_FALSE(first.holder || first.taken_over);
  EXPECT_EQ(files(), std::vector<std::string>{"000000000000.json"});
  EXPECT_EQ(read(0)["pid"], ::getpid());
  EXPECT_EQ(read(0)["released"], false);

  auto second = PointLock::acquire(dir(), quick());  // this very process is alive and beating
  EXPECT_FALSE(second.lock);
  ASSERT_TRUE(second.holder);
  EXPECT_EQ(second.holder->pid, ::getpid());
  EXPECT_THAT(second.holder->describe(), HasSubstr(fmt::format("pid {} on host ", ::getpid())));
  EXPECT_EQ(files(), std::vector<std::string>{"000000000000.json"});  // a refusal writes nothing
}

TEST_F(PointLocks, AReleasedLockIsTakenByTheNextGenerationWithoutATakeOver) {
  { auto a = PointLock::acquire(dir(), quick()); ASSERT_TRUE(a.lock); }
  EXPECT_EQ(read(0)["released"], true);
  auto b = PointLock::acquire(dir(), quick());
  ASSERT_TRUE(b.lock);
  EXPECT_FALSE(b.taken_over);
  EXPECT_EQ(files(), std::vector<std::string>{"000000000001.json"});  // the ones below it are removed
}

TEST_F(PointLocks, ALiveHolderElsewhereIsRefusedByNameAStaleOneIsTakenOver) {
  plant(0, "node-b", seconds_now());
  auto refused = PointLock::acquire(dir(), quick());
  EXPECT_FALSE(refused.lock);
  ASSERT_TRUE(refused.holder);
  EXPECT_EQ(refused.holder->describe(), "pid 4242 on host node-b (job 77_3), since 2026-01-01T00:00:00Z");

  plant(0, "node-b", seconds_now() - 301);
  auto taken = PointLock::acquire(dir(), quick());
  ASSERT_TRUE(taken.lock);
  ASSERT_TRUE(taken.taken_over);
  EXPECT_EQ(taken.taken_over->host, "node-b");
  EXPECT_THAT(taken.stale_why, HasSubstr("its last heartbeat is 301 s old (stale after 300 s)"));
  EXPECT_EQ(files(), std::vector<std::string>{"000000000001.json"});
  EXPECT_EQ(read(1)["pid"], ::getpid());
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
  auto taken = PointLock::acquire(dir(), quick());
  ASSERT_TRUE(taken.lock);
  EXPECT_THAT(taken.stale_why, HasSubstr(fmt::format("its process (pid {}) is gone from this machine", child)));
}

TEST_F(PointLocks, ADamagedLockFileGoesStaleByItsModificationTime) {
  fs::create_directories(dir());
  std::ofstream(gen(3)) << "{\"pid\": 1, \"heart";
  EXPECT_FALSE(PointLock::acquire(dir(), quick()).lock);  // just written: live for now
  fs::last_write_time(gen(3), fs::file_time_type::clock::now() - std::chrono::hours(1));
  auto taken = PointLock::acquire(dir(), quick());
  ASSERT_TRUE(taken.lock);
  EXPECT_EQ(taken.lock->holder().generation, 4);
}

// Many takers of one stale lock at once: one wins the next generation, every other
// one finds it held.
TEST_F(PointLocks, TakersOfOneStaleLockAtOnceLeaveExactlyOneHolder) {
  plant(0, "node-b", seconds_now() - 1000);
  std::vector<PointLock::Attempt> attempts(8);
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (auto& a : attempts)
    threads.emplace_back([&] {
      while (!go) std::this_thread::yield();
      a = PointLock::acquire(dir(), quick());
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
  auto a = PointLock::acquire(dir(), quick());
  ASSERT_TRUE(a.lock);
  const double first = read(0)["heartbeat"].get<double>();
  EXPECT_TRUE(eventually([&] { return read(0)["heartbeat"].get<double>() > first; }));
  EXPECT_FALSE(a.lock->lost());
  plant(1, "node-b", seconds_now());  // taken over by another machine that judged it stale
  EXPECT_TRUE(eventually([&] { return a.lock->lost(); }));
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
