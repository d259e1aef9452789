#include "util/device.h"

#include "util/error.h"

#include <fmt/format.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#ifdef XSAGPT_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace xsagpt {

namespace {

// OpenMP wait policy. LibTorch's CPU kernels run on GNU OpenMP (the torch wheel's
// libgomp), whose threads, when they reach the end of a parallel region first,
// spin before they sleep (GOMP_SPINCOUNT, 300,000 iterations by default). With
// another job on the cores, the thread still working is descheduled while its
// peer burns the core the two of them need, and each of the thousands of small
// parallel regions in a step pays for it: two such runs side by side on 2 cores
// ran 3x slower than with one thread each. A shorter spin (10,000) did not help;
// sleeping at once (OMP_WAIT_POLICY=passive) did, at little cost on an idle
// machine (docs/benchmarks.md, scripts/bench/bench_threads.sh). libgomp reads its
// settings once, in a constructor that runs when the dynamic loader maps it (as a
// dependency of libtorch_cpu, before any of our code), so a setenv in main() comes
// too late: the process executes itself again with the variable set. A user's own
// OMP_WAIT_POLICY or GOMP_SPINCOUNT is left alone, and so are the commands that do
// no CPU tensor work.
constexpr const char* kWaitPolicy = "passive";
constexpr const char* kMarker = "XSAGPT_OPENMP_DEFAULTS";  // set with the default: a user's value is told apart

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      auto name = line.substr(line.find(':') + 1);
      name.erase(0, name.find_first_not_of(' '));
      return name;
    }
  return "unknown CPU";
}

}  // namespace

void check_device_spec(const std::string& want, const std::string& key) {
  if (want == "auto" || want == "cpu" || want == "cuda") return;
  if (want.rfind("cuda:", 0) == 0 && want.size() > 5 && want.size() <= 8 &&
      want.find_first_not_of("0123456789", 5) == std::string::npos)
    return;
  throw ConfigError(key + ": expected \"auto\", \"cpu\", \"cuda\" or \"cuda:N\", got \"" + want + "\"");
}

torch::Device resolve_device(const std::string& want, const std::string& key, int64_t local_rank) {
  check_device_spec(want, key);
  if (want == "cpu") return torch::kCPU;
  const bool cuda = torch::cuda::is_available();
  if (want == "auto" && !cuda) return torch::kCPU;
  if (!cuda) throw ConfigError(key + ": \"" + want + "\" asked for CUDA but no CUDA device is available");
  const int64_t index = want.rfind("cuda:", 0) == 0 ? std::stoll(want.substr(5)) : local_rank;
  const auto count = static_cast<int64_t>(torch::cuda::device_count());
  if (index >= count)
    throw ConfigError(fmt::format("{}: \"{}\" needs CUDA device {}{}, but this process sees {} (0..{})", key, want,
                                  index, want.rfind("cuda:", 0) == 0 ? "" : " (the local rank)", count, count - 1));
  return {torch::kCUDA, static_cast<c10::DeviceIndex>(index)};
}

std::string device_name(const torch::Device& device) {
#ifdef XSAGPT_CUDA
  if (device.is_cuda()) return at::cuda::getDeviceProperties(device.index() < 0 ? 0 : device.index())->name;
#endif
  if (device.is_cuda()) return "CUDA device (this build has no CUDA)";
  return cpu_model_name();
}

std::optional<double> device_memory(const torch::Device& device) {
#ifdef XSAGPT_CUDA
  if (device.is_cuda())
    return static_cast<double>(at::cuda::getDeviceProperties(device.index() < 0 ? 0 : device.index())->totalGlobalMem);
#endif
  if (device.is_cuda()) return std::nullopt;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return std::nullopt;
  return static_cast<double>(pages) * static_cast<double>(page);
}

void apply_openmp_defaults(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
  if (setenv("OMP_WAIT_POLICY", kWaitPolicy, 1) != 0 || setenv(kMarker, "1", 1) != 0) return;
  execv("/proc/self/exe", argv);
  // Only reached if the exec failed (no /proc): run on with OpenMP's own defaults.
  unsetenv("OMP_WAIT_POLICY");
  unsetenv(kMarker);
}

void check_cpu_threads(int64_t requested, const std::string& key) {
  if (requested < 0) throw ConfigError(key + ": must be >= 0 (0: LibTorch's default, one per physical core)");
  if (requested > kMaxCpuThreads)
    throw ConfigError(fmt::format(
        "{}: must be at most {}, got {} (0: LibTorch's default, one per physical core; a count above the logical "
        "cores of the machine it runs on, {} here, is capped to them)",
        key, kMaxCpuThreads, requested, usable_cpu_cores()));
}

int usable_cpu_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

int setup_cpu_threads(int64_t requested, const std::string& key) {
  check_cpu_threads(requested, key);
  if (requested == 0) return torch::get_num_threads();
  const int cores = usable_cpu_cores();
  if (requested > cores)
    spdlog::warn(
        "{} = {} is more threads than the {} logical cores this process may use; running with {} (threads "
        "beyond the cores only wait their turn, and every step pays for the switching)",
        key, requested, cores, cores);
  torch::set_num_threads(static_cast<int>(std::min<int64_t>(requested, cores)));
  return torch::get_num_threads();
}

std::string cpu_threads_description() {
  std::string wait;
  const char* marker = std::getenv(kMarker);
  if (marker && std::string(marker) == "1" && std::getenv("OMP_WAIT_POLICY"))
    wait = fmt::format("OMP_WAIT_POLICY={} (xsagpt's default)", std::getenv("OMP_WAIT_POLICY"));
  else if (const char* p = std::getenv("OMP_WAIT_POLICY"))
    wait = fmt::format("OMP_WAIT_POLICY={}", p);
  else if (const char* s = std::getenv("GOMP_SPINCOUNT"))
    wait = fmt::format("GOMP_SPINCOUNT={}", s);
  else
    wait = "OpenMP's default wait policy";
  return fmt::format("{} torch threads of {} hardware threads, {}", torch::get_num_threads(), usable_cpu_cores(), wait);
}

}  // namespace xsagpt
