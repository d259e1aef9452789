// `xsagpt bench --profile`: where the training step spends its time. The step
// (train/step.h, as `xsagpt train` runs it) runs under LibTorch's Kineto profiler
// (torch/csrc/autograd/profiler_kineto.h) for a few steps after warm-up, and the
// time is summed by kernel name and by category, so the next speed-up is chosen by
// what costs most rather than guessed.
//   On CUDA: device time of each kernel, memcpy and memset (CUPTI), which is what
//            the GPU is busy with; beside it the step's wall time, whose excess
//            over the kernel time is the GPU idle (launch overhead, host waits).
//   On CPU:  self time of each ATen op (its time less that of the ops it calls),
//            so nested ops (aten::linear -> aten::addmm) are counted once.
// Either way every counted microsecond lands in exactly one kernel and one
// category: the categories sum to the total by construction.
#pragma once

#include "bench/block_bench.h"

#include <nlohmann/json.hpp>

#include <array>
#include <map>
#include <string>
#include <vector>

namespace xsagpt {

// The categories in the order tables list them. "quantize" is what FP8 GEMMs cost
// besides themselves (train.kernels fp8): the amax reductions, the casts to e4m3 and
// e5m2, and the transposed copies of FP8 tensors, so a profile of fused+fp8 sets
// them against the GEMMs they feed.
inline constexpr std::array<const char*, 8> kProfileCategories{"gemm",        "quantize",  "attention", "norm",
                                                               "elementwise", "optimizer", "copies",    "other"};

// The category of a kernel or op by its name, from an ordered table of name
// fragments (first match wins; see step_profile.cpp). XSA's own kernels count as
// attention; the gradient clip's norms count as optimizer; FP8 GEMMs as gemm, and
// the kernels that make their operands as quantize.
std::string profile_category(const std::string& name);

// One profiled interval: a CPU op on a host thread, or a kernel on a stream (lane).
struct ProfiledEvent {
  std::string name;
  int64_t lane = 0;
  int64_t start_ns = 0, end_ns = 0;
};

struct KernelTime {
  std::string name, category;
  double ms = 0;       // per step
  double calls = 0;    // per step
};

struct StepProfile {
  std::string measure;  // what total_ms counts (device kernel time, or CPU op self time)
  int64_t steps = 0;    // profiled steps the figures are averaged over
  double total_ms = 0;  // per step: the sum of every kernel's (op's) time
  double wall_ms = 0;   // per step, measured without the profiler just before it
  std::map<std::string, double> categories;  // per step; sums to total_ms
  std::vector<KernelTime> kernels;           // by name, most time first
};

// Sums events into a profile of `steps` steps: each event's self time (its
// duration less the nested events on its lane) goes to its name and category.
StepProfile summarize_profile(const std::vector<ProfiledEvent>& events, int64_t steps);

// The training step of each variant (built as bench_train_step builds it), warmed
// up with o.warmup steps, timed for `steps` steps, then profiled for `steps` more.
std::map<std::string, StepProfile> profile_train_step(const BenchOptions& o, const ModelConfig& model,
                                                      int64_t micro_batch, int64_t seq_len, int64_t steps);

nlohmann::json to_json(const StepProfile& p);

}  // namespace xsagpt
