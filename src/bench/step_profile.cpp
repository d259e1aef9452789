#include "bench/step_profile.h"

#include "bench/timing.h"
#include "train/step.h"

#include <kineto/ActivityType.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

namespace xsagpt {

namespace {

// Name fragments (matched in lower case, first match wins) and their category.
// The order matters where fragments overlap: multi-tensor copies before the
// optimizer's foreach ops; the clip's norm reductions before the norm layers;
// PyTorch's memory-efficient attention ("fmha_cutlass...") before CUTLASS GEMMs;
// the fused layer norm ("add_norm") before everything elementwise; FP8 GEMMs
// (cuBLASLt's, named by tile, not by type) before the casts that feed them, and
// those before the generic copy kernel they are instances of.
constexpr std::pair<const char*, const char*> kCategoryRules[] = {
    // Multi-tensor copies and zeroing: the bf16 weight cache's refresh, gradients cleared.
    {"copyfunctor", "copies"},
    {"_foreach_copy", "copies"},
    {"_foreach_zero", "copies"},
    // AdamW and the global-norm clip before it (ATen's foreach norms). Muon's step has
    // no op or kernel of its own name: its Newton-Schulz matmuls count as GEMMs.
    {"adam", "optimizer"},
    {"multi_tensor", "optimizer"},
    {"foreach", "optimizer"},
    {"lpnorm", "optimizer"},
    {"normtwoops", "optimizer"},
    {"aten::norm", "optimizer"},
    {"vector_norm", "optimizer"},
    // SDPA's backends (flash, memory-efficient, cuDNN, CPU) and XSA's own kernels.
    {"flash", "attention"},
    {"fmha", "attention"},
    {"sdpa", "attention"},
    {"scaled_dot_product", "attention"},
    {"scaleddotproduct", "attention"},
    {"attention", "attention"},
    {"xsa_forward", "attention"},
    {"xsa_backward", "attention"},
    {"excludeselfvalue", "attention"},
    // cuBLAS (nvjet, xmma, gemm kernels, split-K reduction), CUTLASS, and the ATen ops over them.
    {"gemm", "gemm"},
    {"gemv", "gemm"},
    {"xmma", "gemm"},
    {"nvjet", "gemm"},
    {"cutlass", "gemm"},
    {"cublas", "gemm"},
    {"splitkreduce", "gemm"},
    {"aten::mm", "gemm"},
    {"aten::addmm", "gemm"},
    {"aten::_addmm", "gemm"},
    {"aten::bmm", "gemm"},
    {"aten::baddbmm", "gemm"},
    {"aten::matmul", "gemm"},
    {"scaled_mm", "gemm"},  // at::_scaled_mm, the FP8 GEMM (its CPU op; on CUDA its cuBLASLt kernels above)
    {"aten::linear", "gemm"},
    {"cachedlinear", "gemm"},
    {"fp8linear", "gemm"},  // the FP8 layer's autograd node on a CPU (its casts are ops of their own)
    // Layer norm: ATen's kernels and the fused residual add + norm (kernels/add_norm.h).
    {"layer_norm", "norm"},
    {"layernorm", "norm"},
    {"add_norm", "norm"},
    {"addnorm", "norm"},
    {"rms_norm", "norm"},
    {"rmsnorm", "norm"},
    {"gammabeta", "norm"},
    // FP8's operands: xsagpt's scale-and-cast kernels (kernels/fp8_cast_cuda.h) and any
    // other kernel typed on an FP8 format (__nv_fp8_*), ATen's kernels instantiated
    // for c10::Float8_* (the ATen twin's cast, the transposed copies of e4m3 weights
    // and activations and of e5m2 gradients), and the amax (an infinity-norm
    // reduction, ATen's AbsMaxOps, which nothing else in a step takes; not aten::amax,
    // which the loss's row maxima take too).
    {"fp8", "quantize"},
    {"float8", "quantize"},
    {"absmaxops", "quantize"},
    // Copies, casts (a dtype change is a copy kernel), concatenation, fills.
    {"copy", "copies"},
    {"memcpy", "copies"},
    {"memset", "copies"},
    {"aten::to", "copies"},
    {"aten::_to", "copies"},
    {"clone", "copies"},
    {"contiguous", "copies"},
    {"aten::cat", "copies"},
    {"aten::stack", "copies"},
    {"fill", "copies"},
    {"zero", "copies"},
    // Pointwise ops and row reductions: RoPE, GELU, the loss's softmax, sums.
    {"elementwise", "elementwise"},
    {"reduce_kernel", "elementwise"},
    {"rope", "elementwise"},
    {"gelu", "elementwise"},
    {"softmax", "elementwise"},
    {"cross_entropy", "elementwise"},
    {"crossentropy", "elementwise"},
    {"nll_loss", "elementwise"},
    {"nllloss", "elementwise"},
    {"lmheadloss", "elementwise"},
    {"accumulategrad", "elementwise"},
    {"aten::add", "elementwise"},
    {"aten::sub", "elementwise"},
    {"aten::mul", "elementwise"},
    {"aten::div", "elementwise"},
    {"aten::neg", "elementwise"},
    {"aten::pow", "elementwise"},
    {"aten::sqrt", "elementwise"},
    {"aten::rsqrt", "elementwise"},
    {"aten::exp", "elementwise"},
    {"aten::log", "elementwise"},
    {"aten::tanh", "elementwise"},
    {"aten::sigmoid", "elementwise"},
    {"aten::clamp", "elementwise"},
    {"aten::where", "elementwise"},
    {"aten::sum", "elementwise"},
    {"aten::mean", "elementwise"},
    {"aten::max", "elementwise"},
    {"aten::amax", "elementwise"},
    {"aten::min", "elementwise"},
};

std::string lowercase_name(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The autograd engine records each backward node twice, as "autograd::engine::
// evaluate_function: MulBackward0" around "MulBackward0"; both name the forward
// op, which is what categorises them: MulBackward0 -> aten::mul.
std::string forward_op_name(std::string name) {
  const std::string engine = "autograd::engine::evaluate_function: ";
  if (name.rfind(engine, 0) == 0) name = name.substr(engine.size());
  const auto at = name.rfind("Backward");
  const bool numbered = at != std::string::npos && at > 0 && at + 8 < name.size() &&
                        std::all_of(name.begin() + at + 8, name.end(), [](unsigned char c) { return std::isdigit(c); });
  if (numbered && name.find("::") == std::string::npos) return "aten::" + name.substr(0, at);
  return name;
}

// A Kineto event's interval, or nothing for an event the profile does not count:
// on CUDA the device's kernels, copies and fills; on CPU the ATen ops.
std::optional<ProfiledEvent> counted_event(const torch::autograd::profiler::KinetoEvent& e, bool cuda) {
  using libkineto::ActivityType;
  const auto type = static_cast<ActivityType>(e.activityType());
  if (e.isHiddenEvent() || e.endNs() < e.startNs()) return std::nullopt;
  if (cuda) {
    if (type != ActivityType::CONCURRENT_KERNEL && type != ActivityType::GPU_MEMCPY &&
        type != ActivityType::GPU_MEMSET)
      return std::nullopt;
    return ProfiledEvent{e.name(), e.deviceResourceId(), static_cast<int64_t>(e.startNs()),
                         static_cast<int64_t>(e.endNs())};
  }
  if (type != ActivityType::CPU_OP || e.deviceType() != c10::DeviceType::CPU) return std::nullopt;
  return ProfiledEvent{e.name(), static_cast<int64_t>(e.startThreadId()), static_cast<int64_t>(e.startNs()),
                       static_cast<int64_t>(e.endNs())};
}

// Turns the profiler off however the profiled steps end, so an error in a step
// does not leave it recording the rest of the run.
struct ProfilerSession {
  explicit ProfilerSession(bool cuda) {
    using namespace torch::profiler::impl;
    std::set<ActivityType> activities{ActivityType::CPU};
    if (cuda) activities.insert(ActivityType::CUDA);
    const ProfilerConfig config(ProfilerState::KINETO);
    // Kineto starts only a trace it has prepared (and initialises itself there).
    torch::autograd::profiler::prepareProfiler(config, activities);
    torch::autograd::profiler::enableProfiler(config, activities);
  }
  std::unique_ptr<torch::autograd::profiler::ProfilerResult> stop() {
    on = false;
    return torch::autograd::profiler::disableProfiler();
  }
  ~ProfilerSession() {
    if (!on) return;
    try {
      torch::autograd::profiler::disableProfiler();
    } catch (const std::exception&) {  // already unwinding from the step's own error, which says more
    }
  }
  bool on = true;
};

}  // namespace

std::string profile_category(const std::string& name) {
  const auto key = lowercase_name(forward_op_name(name));
  for (const auto& [fragment, category] : kCategoryRules)
    if (key.find(fragment) != std::string::npos) return category;
  return "other";
}

StepProfile summarize_profile(const std::vector<ProfiledEvent>& events, int64_t steps) {
  TORCH_CHECK(steps >= 1, "summarize_profile: steps must be >= 1");
  // Self time: walk each lane's events by start (the longer first at a tie), with
  // a stack of the events still open; each event takes its overlap off its parent.
  std::vector<size_t> order(events.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto &x = events[a], &y = events[b];
    return std::tie(x.lane, x.start_ns, y.end_ns) < std::tie(y.lane, y.start_ns, x.end_ns);
  });
  std::vector<int64_t> self_ns(events.size());
  std::vector<size_t> open;
  for (const auto i : order) {
    const auto& e = events[i];
    while (!open.empty() && (events[open.back()].lane != e.lane || events[open.back()].end_ns <= e.start_ns))
      open.pop_back();
    self_ns[i] = e.end_ns - e.start_ns;
    if (!open.empty()) self_ns[open.back()] -= std::min(e.end_ns, events[open.back()].end_ns) - e.start_ns;
    open.push_back(i);
  }
  // Sums in integer nanoseconds, so the categories add up to the total exactly.
  std::map<std::string, std::pair<int64_t, int64_t>> by_name;  // ns, calls
  for (size_t i = 0; i < events.size(); ++i) {
    auto& [ns, calls] = by_name[events[i].name];
    ns += self_ns[i];
    ++calls;
  }
  const auto per_step_ms = [&](int64_t ns) { return static_cast<double>(ns) / 1e6 / static_cast<double>(steps); };
  StepProfile p;
  p.steps = steps;
  std::map<std::string, int64_t> category_ns;
  for (const auto* c : kProfileCategories) category_ns[c] = 0;
  int64_t total_ns = 0;
  for (const auto& [name, t] : by_name) {
    const auto category = profile_category(name);
    category_ns[category] += t.first;
    total_ns += t.first;
    p.kernels.push_back({name, category, per_step_ms(t.first),
                         static_cast<double>(t.second) / static_cast<double>(steps)});
  }
  std::stable_sort(p.kernels.begin(), p.kernels.end(),
                   [](const KernelTime& a, const KernelTime& b) { return a.ms > b.ms; });
  for (const auto& [c, ns] : category_ns) p.categories[c] = per_step_ms(ns);
  p.total_ms = per_step_ms(total_ns);
  return p;
}

std::map<std::string, StepProfile> profile_train_step(const BenchOptions& o, const ModelConfig& model,
                                                      int64_t micro_batch, int64_t seq_len, int64_t steps) {
  if (seq_len > model.block_size)
    throw ConfigError("bench: --step-seq-len " + std::to_string(seq_len) + " exceeds the model's block_size " +
                      std::to_string(model.block_size));
  const bool cuda = o.device.is_cuda();
  auto opts = torch::TensorOptions().dtype(torch::kLong).device(o.device);
  torch::manual_seed(0);
  const auto x = torch::randint(0, model.vocab_size, {micro_batch, seq_len}, opts);
  const auto y = torch::randint(0, model.vocab_size, {micro_batch, seq_len}, opts);
  const NextBatch next = [&] { return std::pair{x, y}; };
  DistContext single;
  std::map<std::string, StepProfile> out;
  for (const auto& v : o.variants) {  // one variant alive at a time, as the timed step
    auto parts = bench_training_parts(o, model, v, single);
    TrainStep step(parts.model, *parts.optimizer, *parts.sync, parts.params, o.accumulation, o.train.grad_clip);
    auto run = [&] {
      for (int64_t i = 0; i < steps; ++i) step(next, 1e-4);
    };
    for (int64_t i = 0; i < std::max<int64_t>(1, o.warmup); ++i) step(next, 1e-4);  // AdamW's state allocated
    sync_device(o.device);
    const auto t0 = std::chrono::steady_clock::now();
    run();
    sync_device(o.device);
    const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

    ProfilerSession session(cuda);
    run();
    sync_device(o.device);
    const auto result = session.stop();
    std::vector<ProfiledEvent> events;
    for (const auto& e : result->events())
      if (auto c = counted_event(e, cuda)) events.push_back(std::move(*c));
    if (events.empty())
      throw std::runtime_error(cuda ? "bench --profile: the profiler recorded no CUDA kernels (is CUPTI available?)"
                                    : "bench --profile: the profiler recorded no CPU ops");
    auto p = summarize_profile(events, steps);
    p.measure = cuda ? "device time of CUDA kernels, memcpy and memset" : "self time of CPU ops";
    p.wall_ms = wall_ms / static_cast<double>(steps);
    out[v] = std::move(p);
  }
  return out;
}

nlohmann::json to_json(const StepProfile& p) {
  auto kernels = nlohmann::json::array();
  for (const auto& k : p.kernels)
    kernels.push_back({{"name", k.name}, {"category", k.category}, {"ms", k.ms}, {"calls", k.calls}});
  return {{"measure", p.measure}, {"steps", p.steps},           {"total_ms", p.total_ms},
          {"wall_ms", p.wall_ms}, {"categories", p.categories}, {"kernels", kernels}};
}

}  // namespace xsagpt
