// util/device.h: the device text every command takes, checked by syntax alone and
// resolved against the machine (both branches: whichever this machine has is
// asserted, on a GPU machine the CUDA one), errors naming the key; the CPU's name
// and memory against what the kernel reports in /proc.
#include "config/schema.h"
#include "util/device.h"

#include "helpers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>

using namespace xsagpt;
using ::testing::HasSubstr;

namespace {

std::string config_error_of(const std::function<void()>& f) { return test::error_of<ConfigError>(f); }

}  // namespace

TEST(Device, SpecSyntaxIsCheckedWithoutAskingForCuda) {
  for (const char* ok : {"auto", "cpu", "cuda", "cuda:0", "cuda:7", "cuda:15"})
    EXPECT_NO_THROW(check_device_spec(ok, "train.device")) << ok;
  for (const char* bad : {"gpu", "CPU", "", "cuda:", "cuda0", "cuda:x", "cuda:-1", "cuda:1:2", "cudax", " cpu"}) {
    const auto msg = config_error_of([&] { check_device_spec(bad, "train.device"); });
    EXPECT_THAT(msg, HasSubstr("train.device: expected \"auto\", \"cpu\", \"cuda\" or \"cuda:N\"")) << bad;
    EXPECT_THAT(msg, HasSubstr(std::string("got \"") + bad + "\"")) << bad;
  }
}

TEST(Device, ResolvesOnThisMachineAndNamesTheFlag) {
  EXPECT_EQ(resolve_device("cpu", "--device"), torch::Device(torch::kCPU));
  EXPECT_THAT(config_error_of([] { resolve_device("gpu", "--device"); }), HasSubstr("--device: expected"));
  if (!torch::cuda::is_available()) {
    EXPECT_EQ(resolve_device("auto", "--device", 3), torch::Device(torch::kCPU));
    for (const char* want : {"cuda", "cuda:0"})
      EXPECT_THAT(config_error_of([&] { resolve_device(want, "train.device"); }),
                  HasSubstr("train.device: \"" + std::string(want) + "\" asked for CUDA but no CUDA device"));
    return;
  }
  const auto n = static_cast<int64_t>(torch::cuda::device_count());
  EXPECT_EQ(resolve_device("auto", "--device"), torch::Device(torch::kCUDA, 0));
  EXPECT_EQ(resolve_device("cuda", "train.device", n - 1), torch::Device(torch::kCUDA, n - 1));  // the local rank
  EXPECT_EQ(resolve_device("cuda:0", "train.device", n - 1), torch::Device(torch::kCUDA, 0));
  EXPECT_THAT(config_error_of([&] { resolve_device("cuda", "train.device", n); }),
              HasSubstr("train.device: \"cuda\" needs CUDA device " + std::to_string(n) + " (the local rank)"));
  EXPECT_THAT(config_error_of([&] { resolve_device("cuda:" + std::to_string(n), "--device"); }),
              HasSubstr("this process sees " + std::to_string(n)));
  EXPECT_FALSE(device_name(torch::Device(torch::kCUDA, 0)).empty());
  ASSERT_TRUE(device_memory(torch::Device(torch::kCUDA, 0)).has_value());
  EXPECT_GT(*device_memory(torch::Device(torch::kCUDA, 0)), 1e9);
}

TEST(Device, CpuNameAndMemoryAreWhatTheKernelReports) {
  std::ifstream cpuinfo("/proc/cpuinfo"), meminfo("/proc/meminfo");
  if (!cpuinfo || !meminfo) GTEST_SKIP() << "no /proc";
  std::string line, model;
  while (std::getline(cpuinfo, line) && model.empty())
    if (line.find("model name") == 0) model = line.substr(line.find(": ") + 2);
  if (!model.empty()) {
    EXPECT_EQ(device_name(torch::kCPU), model);
  }
  double mem_kib = 0;
  while (std::getline(meminfo, line))
    if (line.find("MemTotal:") == 0) std::istringstream(line.substr(9)) >> mem_kib;
  ASSERT_GT(mem_kib, 0);
  ASSERT_TRUE(device_memory(torch::kCPU).has_value());
  EXPECT_NEAR(*device_memory(torch::kCPU), mem_kib * 1024, 0.001 * mem_kib * 1024);
}

TEST(Device, ThreadSetupKeepsTheDefaultOrSetsTheCount) {
  const int before = torch::get_num_threads();
  EXPECT_EQ(setup_cpu_threads(0, "--threads"), before);
  EXPECT_EQ(setup_cpu_threads(1, "--threads"), 1);
  EXPECT_EQ(torch::get_num_threads(), 1);
  EXPECT_THAT(cpu_threads_description(), HasSubstr("1 torch threads of "));
  setup_cpu_threads(before, "--threads");
}

// The logical cores this process may use, as nproc counts them (its CPU affinity; nproc
// would also honour OpenMP's thread variables, which the test runner may set).
TEST(Device, UsableCoresAreTheAffinityNprocCounts) {
  FILE* p = popen("env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc", "r");
  ASSERT_NE(p, nullptr);
  int nproc = 0;
  ASSERT_EQ(fscanf(p, "%d", &nproc), 1);
  pclose(p);
  ASSERT_GE(nproc, 1);
  EXPECT_EQ(usable_cpu_cores(), nproc);
}

// A thread count is refused by name past a bound that holds on every machine, so a config
// written for a bigger one validates anywhere; where it runs, a count past the cores is
// capped to them. Before: 100000 was accepted, and the run was still creating threads a
// minute later.
TEST(Device, ThreadCountsPastTheBoundAreRefusedPastTheCoresCapped) {
  const int before = torch::get_num_threads(), cores = usable_cpu_cores();
  for (const auto& [n, key] : {std::pair<int64_t, const char*>{100000, "train.threads"}, {1025, "--threads"}}) {
    const auto msg = config_error_of([&] { setup_cpu_threads(n, key); });
    EXPECT_THAT(msg, HasSubstr(std::string(key) + ": must be at most 1024, got " + std::to_string(n)));
    EXPECT_THAT(msg, HasSubstr(fmt::format("{} here", cores)));
    EXPECT_EQ(config_error_of([&] { check_cpu_threads(n, key); }), msg);
  }
  EXPECT_THAT(config_error_of([] { check_cpu_threads(-1, "train.threads"); }),
              HasSubstr("train.threads: must be >= 0"));
  // A refused count changed nothing; the bound itself passes on any machine, whatever its cores.
  EXPECT_EQ(torch::get_num_threads(), before);
  EXPECT_NO_THROW(check_cpu_threads(kMaxCpuThreads, "train.threads"));
  const int64_t over = std::min<int64_t>(cores + 7, kMaxCpuThreads);
  EXPECT_EQ(setup_cpu_threads(over, "train.threads"), std::min<int64_t>(over, cores));
  EXPECT_EQ(torch::get_num_threads(), std::min<int64_t>(over, cores));
  EXPECT_EQ(setup_cpu_threads(cores, "train.threads"), cores);
  setup_cpu_threads(before, "--threads");
}
