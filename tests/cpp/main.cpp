// The test binary's entry point: googletest's main, plus what ctest needs now that it
// starts one process per test suite rather than one per test (tests/CMakeLists.txt;
// each process spends about half a CPU-second loading LibTorch before its first test):
// - a time limit per test, XSAGPT_TEST_TIME_LIMIT seconds when set (ctest sets it): a
//   test that hangs ends its process with the test's name, as ctest's own limit did
//   when a process held one test;
// - a line saying that every test the process ran was skipped (the CUDA suites on a
//   machine without a GPU), from which ctest reports the suite as skipped, not passed.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace {

// Watches the running test from a thread of its own; the tests never see it.
class TestTimeLimit : public testing::EmptyTestEventListener {
 public:
  explicit TestTimeLimit(double seconds) : limit_(seconds), watcher_([this] { watch(); }) {}
  ~TestTimeLimit() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    watcher_.join();
  }

  void OnTestStart(const testing::TestInfo& test) override {
    std::lock_guard<std::mutex> lock(mutex_);
    name_ = std::string(test.test_suite_name()) + "." + test.name();
    deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limit_));
    running_ = true;
    wake_.notify_all();
  }
  void OnTestEnd(const testing::TestInfo&) override {
    std::lock_guard<std::mutex> lock(mutex_);
    running_ = false;
  }

 private:
  using Clock = std::chrono::steady_clock;

  void watch() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      if (running_ && Clock::now() >= deadline_) {
        std::fflush(stdout);
        std::fprintf(stderr, "\n[  TIMEOUT ] %s ran past its limit of %.0f s (XSAGPT_TEST_TIME_LIMIT)\n",
                     name_.c_str(), limit_);
        std::fflush(stderr);
        std::_Exit(124);  // the test's own thread may be stuck: no unwinding, no destructors
      }
      if (running_)
        wake_.wait_until(lock, deadline_);
      else
        wake_.wait(lock);
    }
  }

  const double limit_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::string name_;
  Clock::time_point deadline_;
  bool running_ = false;
  bool stop_ = false;
  std::thread watcher_;  // last: starts once the members it reads exist
};

// ctest's SKIP_REGULAR_EXPRESSION for a suite's process matches this line.
class AllSkippedLine : public testing::EmptyTestEventListener {
  void OnTestProgramEnd(const testing::UnitTest& unit) override {
    if (unit.test_to_run_count() > 0 && unit.skipped_test_count() == unit.test_to_run_count())
      std::printf("[ALL SKIPPED] every test this process ran was skipped\n");
  }
};

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
  AllSkippedLine all_skipped;
  listeners.Append(&all_skipped);
  std::unique_ptr<TestTimeLimit> limit;
  if (const char* s = std::getenv("XSAGPT_TEST_TIME_LIMIT"); s && std::atof(s) > 0) {
    limit = std::make_unique<TestTimeLimit>(std::atof(s));
    listeners.Append(limit.get());
  }
  const int rc = RUN_ALL_TESTS();
  // The listeners are this function's, not googletest's to delete.
  listeners.Release(&all_skipped);
  if (limit) listeners.Release(limit.get());
  return rc;
}
