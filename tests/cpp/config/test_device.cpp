// util/device.h: the device text every command takes, checked by syntax alone and
// resolved against the machine (both branches: whichever this machine has is
// asserted, on a GPU machine the CUDA one), errors naming the key; the CPU's name
// and memory against what the kernel reports in /proc.
#include "config/schema.h"
#include "util/device.h"

#include "helpers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
  EXPECT_EQ(setup_cpu_threads(0), before);
  EXPECT_EQ(setup_cpu_threads(1), 1);
  EXPECT_EQ(torch::get_num_threads(), 1);
  EXPECT_THAT(cpu_threads_description(), HasSubstr("1 torch threads of "));
  setup_cpu_threads(before);
}
