#include "distributed/process_group.h"

#include "distributed/master_check.h"
#include "util/error.h"

#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
// The torch wheel ships c10d's headers but not Gloo's, which ProcessGroupGloo.hpp
// includes; Debian's libgloo-dev provides them (declarations only: the Gloo code
// that runs is the copy inside libtorch_cpu, and the class layout this file needs
// holds Gloo objects only behind pointers). Without them the build still succeeds
// and distributed runs stop with a message saying what to install.
#if __has_include(<gloo/algorithm.h>)
#define XSAGPT_HAVE_GLOO 1
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <exception>
#include <limits>

namespace xsagpt {

namespace {

using BackendType = c10d::ProcessGroup::BackendType;

constexpr int64_t kBucketBytes = 25 << 20;     // DDP's bucket_cap_mb default
constexpr size_t kBroadcastBytes = 250 << 20;  // DDP's bucket for broadcasting initial states

std::string failure(const DistContext& d, const std::string& op, const std::string& what,
                    std::chrono::milliseconds timeout) {
  return fmt::format(
      "rank {} of {}: {} failed: {}\n(a peer rank may have exited, or stalled for longer than the {} s "
      "collective timeout, XSAGPT_DIST_TIMEOUT; the launcher's summary names the rank that failed first)",
      d.rank(), d.world_size(), op, what, timeout.count() / 1000.0);
}

// Runs a collective; a failure becomes an error naming this rank and the operation.
template <class F>
auto guarded(const DistContext& d, const std::string& op, std::chrono::milliseconds timeout, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const c10::Error& e) {
    throw std::runtime_error(failure(d, op, e.what_without_backtrace(), timeout));
  } catch (const std::exception& e) {
    throw std::runtime_error(failure(d, op, e.what(), timeout));
  }
}

// The Reducer of PyTorch's DistributedDataParallel, set up as DDP sets it up
// with find_unused_parameters=False (every parameter gets a gradient each step).
class ReducerSync : public GradientSync {
 public:
  ReducerSync(const DistContext& d, c10::intrusive_ptr<c10d::ProcessGroup> pg, const std::vector<torch::Tensor>& params,
              std::chrono::milliseconds timeout)
      : GradientSync(params), dist_(d), timeout_(timeout) {
    TORCH_CHECK(!params.empty(), "gradient_sync: no parameters");
    const std::vector<bool> sparse(params.size(), false);
    // DDP starts with a single bucket: the order in which gradients become ready
    // is unknown until one backward pass has run. The Reducer records it and
    // rebuild_buckets() re-buckets by it (1 MB first bucket, then 25 MB).
    auto [buckets, limits] =
        c10d::compute_bucket_assignment_by_size(params, {std::numeric_limits<size_t>::max()}, sparse);
    std::reverse(buckets.begin(), buckets.end());
    reducer_ = std::make_unique<c10d::Reducer>(
        params, std::move(buckets), std::move(pg), sparse, kBucketBytes,
        /*find_unused_parameters=*/false,
        // After the all-reduce, .grad is a view into its bucket instead of a copy
        // of it (and attach_gradients_to_buckets() makes it one from the start).
        /*gradient_as_bucket_view=*/true, std::unordered_map<size_t, std::string>{}, c10d::kDefaultFirstBucketBytes,
        /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false, std::vector<int64_t>{});
  }

  void backward(const torch::Tensor& loss, bool last) override {
    // DDP calls this before every forward with grad enabled; it acts (once, with
    // a broadcast of rank 0's bucket layout) after the first reduced backward.
    if (guarded(dist_, "re-bucketing the gradients", timeout_, [&] { return reducer_->rebuild_buckets(); }))
      rebuilt_ = true;
    attach_gradients_to_buckets();
    if (!last) {
      loss.backward();  // the Reducer's hooks stay idle: local accumulation only
      return;
    }
    guarded(dist_, "backward pass with gradient all-reduce", timeout_, [&] {
      reducer_->prepare_for_backward({});
      loss.backward();
      // Every parameter must have been reduced; otherwise the gradients are local.
      reducer_->check_finalized();
    });
    reduced_ = true;
  }

  void zero_grad() override {
    // The next backward re-buckets: let go of the first bucket before the new
    // ones are allocated (gradients still pointing into it would keep it, and
    // the Reducer would copy them over); they are attached to the new buckets.
    if (reduced_ && !rebuilt_) return GradientSync::zero_grad();
    // Otherwise in place, and backward accumulates into the buckets.
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> grads;
    for (const auto& p : params_)
      if (p.grad().defined()) grads.push_back(p.grad());
    if (!grads.empty()) at::_foreach_zero_(grads);
  }

 private:
  // Gradients that are not defined yet (first step, after re-bucketing) become
  // zeroed views into their buckets, which is what the Reducer makes of them
  // after an all-reduce anyway: then no backward pass, not even the first
  // micro-batches of the first step, allocates gradients beside the buckets.
  void attach_gradients_to_buckets() {
    if (std::all_of(params_.begin(), params_.end(), [](const torch::Tensor& p) { return p.grad().defined(); })) return;
    torch::NoGradGuard no_grad;
    for (const auto& bucket : reducer_->get_grad_buckets(/*return_zero_tensors=*/false)) {
      const auto grads = bucket.getGradients();  // views of the bucket's flat buffer
      const auto params = bucket.getParameters();
      for (size_t i = 0; i < params.size(); ++i) {
        // (A non-contiguous parameter is left to the Reducer, whose views follow its strides.)
        if (params[i].grad().defined() || !params[i].is_contiguous()) continue;
        grads[i].zero_();
        params[i].mutable_grad() = grads[i];
      }
    }
  }

  const DistContext& dist_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<c10d::Reducer> reducer_;
  bool reduced_ = false, rebuilt_ = false;
};

c10::ScalarType same_width_int(const torch::Tensor& t) {
  switch (t.element_size()) {
    case 1: return torch::kInt8;
    case 2: return torch::kInt16;
    case 4: return torch::kInt32;
    case 8: return torch::kInt64;
  }
  throw std::invalid_argument(fmt::format("replica_checksum: unsupported element size {}", t.element_size()));
}

}  // namespace

DistOptions dist_options_from_env(const EnvLookup& env) {
  DistOptions o;
  if (auto b = env("XSAGPT_DIST_BACKEND")) {
    if (*b != "auto" && *b != "nccl" && *b != "gloo")
      throw ConfigError("XSAGPT_DIST_BACKEND: expected auto, nccl or gloo, got \"" + *b + "\"");
    o.backend = *b;
  }
  if (auto t = env("XSAGPT_DIST_TIMEOUT")) {
    double s = 0;
    auto [p, ec] = std::from_chars(t->data(), t->data() + t->size(), s);
    if (ec != std::errc() || p != t->data() + t->size() || !(s > 0))
      throw ConfigError("XSAGPT_DIST_TIMEOUT: expected a number of seconds > 0, got \"" + *t + "\"");
    o.timeout = std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
  }
  return o;
}

struct ProcessGroupContext::Impl {
  LaunchEnv env;
  DistOptions opts;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroup> pg;
  bool nccl = false;
  std::string cuda_backend;  // "" without CUDA
};

ProcessGroupContext::ProcessGroupContext(const LaunchEnv& env, const DistOptions& opts)
    : impl_(std::make_unique<Impl>()) {
  rank_ = env.rank;
  local_rank_ = env.local_rank;
  world_size_ = env.world_size;
  auto& m = *impl_;
  m.env = env;
  m.opts = opts;
  check_master_address(env);  // on every rank, before any of them waits for another

  const bool cuda = torch::cuda::is_available();
  if (opts.backend == "nccl" && !cuda)
    throw ConfigError("XSAGPT_DIST_BACKEND: \"nccl\" needs CUDA, but no CUDA device is available");
#ifdef USE_C10D_NCCL
  m.nccl = cuda && opts.backend != "gloo";
#else
  if (opts.backend == "nccl") throw ConfigError("XSAGPT_DIST_BACKEND: \"nccl\": this LibTorch was built without NCCL");
#endif
  if (m.nccl) {
    const auto n = static_cast<int64_t>(torch::cuda::device_count());
    if (local_rank_ >= n)
      throw ConfigError(
          fmt::format("LOCAL_RANK: {} but this process sees {} CUDA device(s); start at most {} "
                      "processes per node (or train on CPU: XSAGPT_DIST_BACKEND=gloo and "
                      "--set train.device=cpu)",
                      local_rank_, n, n));
    // One GPU per process: NCCL and the caching allocator use the current device.
    c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA)
        .setDevice(c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(local_rank_)));
  }

#ifndef XSAGPT_HAVE_GLOO
  throw ConfigError(
      "distributed training: this xsagpt was built without Gloo's headers (Debian package "
      "libgloo-dev, which scripts/setup.sh installs); install it and rebuild");
#endif

  // ---- store, as torch.distributed.rendezvous's _create_c10d_store ----------
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(env.master_port);
  so.isServer = !env.agent_store && env.rank == 0;
  so.numWorkers = static_cast<size_t>(env.world_size);
  so.timeout = opts.timeout;
  so.multiTenant = !env.agent_store;
  so.useLibUV = process_env("USE_LIBUV").value_or("1") == "1";
  try {
    m.store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, so);
  } catch (const std::exception& e) {
    const std::string what =
        dynamic_cast<const c10::Error*>(&e) ? static_cast<const c10::Error&>(e).what_without_backtrace() : e.what();
    throw std::runtime_error(fmt::format("rank {} of {} ({}): could not {} the TCPStore at {}:{}: {}", rank_,
                                         world_size_, env.launcher, so.isServer ? "start" : "reach", env.master_addr,
                                         env.master_port, what));
  }
  m.store->setTimeout(opts.timeout);
  // init_process_group's PrefixStore("default_pg"), then the default group's "0/".
  auto group_store =
      c10::make_intrusive<c10d::PrefixStore>("0/", c10::make_intrusive<c10d::PrefixStore>("default_pg", m.store));

  // ---- process group: gloo for CPU tensors, NCCL (or gloo) for CUDA ones -----
  m.pg = c10::make_intrusive<c10d::ProcessGroup>(group_store, static_cast<int>(rank_), static_cast<int>(world_size_));
#ifdef XSAGPT_HAVE_GLOO
  auto gloo_opts = c10d::ProcessGroupGloo::Options::create_default(opts.timeout);
  gloo_opts->group_name = "0";
  auto gloo = guarded(*this, "connecting to the other ranks (gloo)", opts.timeout, [&] {
    return c10::make_intrusive<c10d::ProcessGroupGloo>(c10::make_intrusive<c10d::PrefixStore>("cpu/", group_store),
                                                       static_cast<int>(rank_), static_cast<int>(world_size_),
                                                       gloo_opts);
  });
  gloo->setSequenceNumberForGroup();
  m.pg->setBackend(c10::DeviceType::CPU, BackendType::GLOO, c10::intrusive_ptr<c10d::Backend>(gloo));
  m.pg->setDefaultBackend(BackendType::GLOO);
  if (cuda && !m.nccl) {
    m.pg->setBackend(c10::DeviceType::CUDA, BackendType::GLOO, c10::intrusive_ptr<c10d::Backend>(gloo));
    m.cuda_backend = "gloo";
  }
#endif
#ifdef USE_C10D_NCCL
  if (m.nccl) {
    auto nccl_opts = c10d::ProcessGroupNCCL::Options::create();
    nccl_opts->timeout = opts.timeout;
    nccl_opts->group_name = "0";
    // Communicators are created lazily, at the first collective on CUDA tensors.
    auto nccl =
        c10::make_intrusive<c10d::ProcessGroupNCCL>(c10::make_intrusive<c10d::PrefixStore>("cuda/", group_store),
                                                    static_cast<int>(rank_), static_cast<int>(world_size_), nccl_opts);
    nccl->setSequenceNumberForGroup();
    m.pg->setBackend(c10::DeviceType::CUDA, BackendType::NCCL, c10::intrusive_ptr<c10d::Backend>(nccl));
    m.pg->setDefaultBackend(BackendType::NCCL);
    m.cuda_backend = "nccl";
  }
#endif
  m.pg->setGroupName("0");
  m.pg->setGroupDesc("default_pg");
}

ProcessGroupContext::~ProcessGroupContext() {
  // A clean exit shuts the backends down as destroy_process_group does; when
  // unwinding from a failure the peers may be gone, and aborting does not wait
  // for them.
  try {
    if (std::uncaught_exceptions() > 0)
      impl_->pg->abort();
    else
      impl_->pg->shutdown();
  } catch (const std::exception& e) {
    spdlog::warn("rank {}: closing the process group: {}", rank_, e.what());
  }
}

std::string ProcessGroupContext::description() const {
  const auto& m = *impl_;
  return fmt::format(
      "rank {} of {} via {}; gloo for CPU tensors{}; store {}:{}{} (host from {}, port from {}); timeout {} s", rank_,
      world_size_, m.env.launcher,
      m.cuda_backend.empty() ? "" : fmt::format(", {} for CUDA tensors (cuda:LOCAL_RANK)", m.cuda_backend),
      m.env.master_addr, m.env.master_port, m.env.agent_store ? " (torchrun agent's)" : " (served by rank 0)",
      m.env.master_from, m.env.port_from,
      m.opts.timeout.count() / 1000.0);
}

void ProcessGroupContext::broadcast(std::vector<torch::Tensor>& tensors) {
  const auto& m = *impl_;
  // As DDP's constructor, first the same shapes everywhere; every rank learns who differs.
  nlohmann::json shapes = nlohmann::json::array();
  for (const auto& t : tensors) shapes.push_back({c10::toString(t.scalar_type()), t.sizes().vec()});
  const auto all = all_gather(shapes);
  std::vector<int64_t> differ;
  for (int64_t r = 1; r < world_size_; ++r)
    if (all[static_cast<size_t>(r)] != all[0]) differ.push_back(r);
  if (!differ.empty()) {
    const auto& other = all[static_cast<size_t>(differ[0])];
    size_t i = 0;
    while (i < std::min(other.size(), all[0].size()) && other[i] == all[0][i]) ++i;
    throw std::runtime_error(fmt::format(
        "rank(s) {} built a different model than rank 0 (rank {} has {} tensors, rank 0 {}; first difference at "
        "tensor #{}: {} vs {}); every rank must train the same config",
        fmt::join(differ, ", "), differ[0], other.size(), all[0].size(), i, i < other.size() ? other[i].dump() : "none",
        i < all[0].size() ? all[0][i].dump() : "none"));
  }
  guarded(*this, "broadcast of rank 0's tensors", m.opts.timeout, [&] {
    torch::NoGradGuard no_grad;
    c10d::broadcast_coalesced(m.pg, tensors, kBroadcastBytes, 0);
  });
}

std::unique_ptr<GradientSync> ProcessGroupContext::gradient_sync(const std::vector<torch::Tensor>& params) {
  return std::make_unique<ReducerSync>(*this, impl_->pg, params, impl_->opts.timeout);
}

void ProcessGroupContext::broadcast_from_owners(std::vector<torch::Tensor>& tensors,
                                                const std::vector<int64_t>& owner) {
  TORCH_CHECK(owner.size() == tensors.size(), "broadcast_from_owners: ", tensors.size(), " tensors but ", owner.size(),
              " owners");
  guarded(*this, "broadcast of the updated parameters from their owners", impl_->opts.timeout, [&] {
    torch::NoGradGuard no_grad;
    for (int64_t r = 0; r < world_size_; ++r) {
      std::vector<torch::Tensor> owned;
      for (size_t i = 0; i < tensors.size(); ++i)
        if (owner[i] == r) owned.push_back(tensors[i]);
      if (!owned.empty()) c10d::broadcast_coalesced(impl_->pg, owned, kBucketBytes, static_cast<int>(r));
    }
  });
}

void ProcessGroupContext::send_to_main(torch::Tensor& t, int64_t owner) {
  if (owner == 0 || (rank_ != 0 && rank_ != owner)) return;
  guarded(*this, fmt::format("sending optimizer state from rank {} to rank 0", owner), impl_->opts.timeout, [&] {
    // One message at a time between a pair: sends and receives match in order.
    std::vector<at::Tensor> v{t};
    if (rank_ == owner)
      impl_->pg->send(v, 0, /*tag=*/0)->wait();
    else
      impl_->pg->recv(v, static_cast<int>(owner), /*tag=*/0)->wait();
  });
}

torch::Tensor ProcessGroupContext::mean(const torch::Tensor& t) {
  std::vector<at::Tensor> v{t.detach().clone()};
  guarded(*this, "all-reduce of a logged value", impl_->opts.timeout, [&] { impl_->pg->allreduce(v)->wait(); });
  return v[0] / static_cast<double>(world_size_);
}

std::vector<nlohmann::json> ProcessGroupContext::all_gather(const nlohmann::json& j) {
  const auto& m = *impl_;
  return guarded(*this, "all-gather of loader states", m.opts.timeout, [&] {
    const std::string text = j.dump();
    // Lengths first, then every rank's text padded to the longest.
    std::vector<at::Tensor> len_in{torch::tensor({static_cast<int64_t>(text.size())}, torch::kLong)};
    std::vector<std::vector<at::Tensor>> len_out(1);
    for (int64_t r = 0; r < world_size_; ++r) len_out[0].push_back(torch::empty({1}, torch::kLong));
    m.pg->allgather(len_out, len_in)->wait();
    int64_t longest = 0;
    for (const auto& l : len_out[0]) longest = std::max(longest, l.item<int64_t>());
    auto buf = torch::zeros({longest}, torch::kUInt8);
    std::copy(text.begin(), text.end(), reinterpret_cast<char*>(buf.data_ptr<uint8_t>()));
    std::vector<at::Tensor> in{buf};
    std::vector<std::vector<at::Tensor>> out(1);
    for (int64_t r = 0; r < world_size_; ++r) out[0].push_back(torch::empty({longest}, torch::kUInt8));
    m.pg->allgather(out, in)->wait();
    std::vector<nlohmann::json> result;
    for (int64_t r = 0; r < world_size_; ++r) {
      const auto* p = reinterpret_cast<const char*>(out[0][r].data_ptr<uint8_t>());
      result.push_back(nlohmann::json::parse(std::string(p, static_cast<size_t>(len_out[0][r].item<int64_t>()))));
    }
    return result;
  });
}

bool ProcessGroupContext::any(bool local) {
  std::vector<at::Tensor> v{torch::tensor({local ? 1 : 0}, torch::kInt)};
  c10d::AllreduceOptions o;
  o.reduceOp = c10d::ReduceOp::MAX;
  guarded(*this, "all-reduce of the stop flag", impl_->opts.timeout, [&] { impl_->pg->allreduce(v, o)->wait(); });
  return v[0].item<int>() != 0;
}

std::pair<uint64_t, uint64_t> replica_checksum(const torch::Tensor& t) {
  torch::NoGradGuard no_grad;
  auto bits = t.detach().contiguous().view(-1).view(same_width_int(t));
  uint64_t s1 = 0, s2 = 0;                         // unsigned: wrap-around is the definition
  for (const auto& chunk : bits.split(1 << 24)) {  // bounded int64 temporaries
    const auto w = chunk.to(torch::kLong);
    s1 += static_cast<uint64_t>(w.sum().item<int64_t>());
    s2 += static_cast<uint64_t>((w * w).sum().item<int64_t>());
  }
  return {s1, s2};
}

void ProcessGroupContext::check_replicated(const std::vector<torch::Tensor>& tensors, const std::string& what) {
  const auto& m = *impl_;
  const auto n = static_cast<int64_t>(tensors.size());
  auto local = torch::empty({n, 2}, torch::kLong);
  auto* l = local.data_ptr<int64_t>();
  uint64_t t1 = 0, t2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    auto [s1, s2] = replica_checksum(tensors[static_cast<size_t>(i)]);
    l[2 * i] = static_cast<int64_t>(s1);
    l[2 * i + 1] = static_cast<int64_t>(s2);
    t1 += s1;
    t2 += s2;
  }
  std::vector<at::Tensor> in{local};
  std::vector<std::vector<at::Tensor>> out(1);
  for (int64_t r = 0; r < world_size_; ++r) out[0].push_back(torch::empty({n, 2}, torch::kLong));
  guarded(*this, "all-gather of " + what + " checksums", m.opts.timeout, [&] { m.pg->allgather(out, in)->wait(); });
  std::vector<int64_t> differ;
  int64_t first_tensor = -1;
  for (int64_t r = 1; r < world_size_; ++r) {
    const auto mismatch = (out[0][r] != out[0][0]).any(1).nonzero();
    if (mismatch.numel() == 0) continue;
    differ.push_back(r);
    if (first_tensor < 0) first_tensor = mismatch[0].item<int64_t>();
  }
  if (!differ.empty())
    throw std::runtime_error(fmt::format(
        "{} differ between ranks: rank(s) {} hold other values than rank 0 (first in tensor #{} of {}, shape {}); "
        "the replicas have diverged",
        what, fmt::join(differ, ", "), first_tensor, n, c10::str(tensors[static_cast<size_t>(first_tensor)].sizes())));
  if (is_main()) spdlog::info("{}: identical on all {} ranks (checksum {:016x}:{:016x})", what, world_size_, t1, t2);
}

void ProcessGroupContext::barrier() {
  // Gloo's monitored barrier names the ranks that did not arrive in time.
  c10d::BarrierOptions o;
  o.timeout = impl_->opts.timeout;
  guarded(*this, "barrier", impl_->opts.timeout, [&] { impl_->pg->monitoredBarrier(o, /*wait_all_ranks=*/true); });
}

std::unique_ptr<DistContext> make_dist_context() {
  const auto env = read_launch_env();
  if (!env) return std::make_unique<DistContext>();
  const auto opts = dist_options_from_env();
  // main.cpp's pattern, tagged with the rank so that interleaved logs stay readable.
  if (env->world_size > 1) spdlog::set_pattern(fmt::format("[%Y-%m-%d %H:%M:%S] [rank {}] [%^%l%$] %v", env->rank));
  auto ctx = std::make_unique<ProcessGroupContext>(*env, opts);
  if (ctx->is_main()) spdlog::info("distributed: {}", ctx->description());
  return ctx;
}

}  // namespace xsagpt
