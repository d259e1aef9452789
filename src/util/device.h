// Device handling in one place: which device a command runs on ("auto", "cpu",
// "cuda", "cuda:N"), what that device is called and how much memory it has, and
// how LibTorch's CPU threads are set up. train, sweep, bench, analyze and sample
// all come through here, so the same text picks the same device everywhere, a bad
// one is refused with the key or flag named, and the CPU thread defaults that keep
// a loaded machine from collapsing (apply_openmp_defaults) apply to every command.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>

namespace xsagpt {

// Checks the text only, without asking for CUDA, so that a GPU config validates
// on any machine: "auto", "cpu", "cuda" or "cuda:N". ConfigError naming `key`.
void check_device_spec(const std::string& want, const std::string& key);

// The device to run on: "cpu"; "auto" is CUDA when present, else the CPU; "auto"
// and "cuda" take GPU `local_rank` (one GPU per process under torchrun or srun);
// "cuda:N" takes GPU N. ConfigError naming `key` for bad text, for CUDA asked for
// where there is none, and for a GPU index this process does not see. "cpu" never
// initialises CUDA.
torch::Device resolve_device(const std::string& want, const std::string& key, int64_t local_rank = 0);

// What the device is, for logs and benchmark records: the GPU's product name
// ("NVIDIA H100 80GB HBM3") or the CPU's model name from /proc/cpuinfo.
std::string device_name(const torch::Device& device);

// Total memory of the device in bytes: the GPU's, or the machine's physical memory
// for the CPU; nullopt where it cannot be told (a CUDA device in a build without CUDA).
std::optional<double> device_memory(const torch::Device& device);

// First thing in main() for the commands that compute on the CPU: unless the
// user set OMP_WAIT_POLICY or GOMP_SPINCOUNT, idle OpenMP threads sleep at once
// (OMP_WAIT_POLICY=passive) instead of spinning for ~3 ms, which made two runs
// sharing 2 cores 3x slower than one thread each. OpenMP reads this before main()
// runs, so the process executes itself again with the variable set (same PID and
// arguments); it returns when nothing is to be done.
void apply_openmp_defaults(char** argv);

// The CPU thread counts a config or flag may ask for. A count is checked on its own,
// by the same rule on every machine, so that a config or sweep written on a laptop for
// a 64-core node validates on the laptop: above kMaxCpuThreads (more logical cores than
// a two-socket server of 192-core CPUs has: 768) it can only be a typo,
// and LibTorch would spend minutes creating the threads. Where it runs, a count above
// the logical cores this process may use is capped to them with a warning naming `key`:
// threads beyond the cores only wait their turn, and a step pays for every switch
// (1,000 threads on 2 cores made a 3 s step take 47 s), while the run computes the same.
inline constexpr int64_t kMaxCpuThreads = 1024;

// ConfigError naming `key` for a count below 0 or above kMaxCpuThreads.
void check_cpu_threads(int64_t requested, const std::string& key);

// The logical cores this process may run on (its CPU affinity, as nproc counts them).
int usable_cpu_cores();

// LibTorch's intra-op CPU threads: `requested` > 0 sets that many, capped to
// usable_cpu_cores() with a warning naming `key`; 0 keeps the default, one per
// physical core (LibTorch's choice). Checks the count first (check_cpu_threads).
// Returns the count in use.
int setup_cpu_threads(int64_t requested, const std::string& key);

// One line for logs and benchmark records: threads in use, hardware threads and
// the OpenMP wait settings, e.g. "2 torch threads of 2 hardware threads, OMP_WAIT_POLICY=passive (xsagpt's default)".
std::string cpu_threads_description();

}  // namespace xsagpt
