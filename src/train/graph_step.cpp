#include "train/graph_step.h"

#include "util/error.h"

#include <ATen/autocast_mode.h>

#include <typeinfo>

#ifdef XSAGPT_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace xsagpt {

namespace {

// Autocast's cast cache off while alive: a cast cached during capture would live
// in the graph's pool and could be handed to work outside it.
class GraphCastCacheOff {
 public:
  GraphCastCacheOff() : prev_(at::autocast::is_autocast_cache_enabled()) {
    at::autocast::set_autocast_cache_enabled(false);
  }
  ~GraphCastCacheOff() { at::autocast::set_autocast_cache_enabled(prev_); }
  GraphCastCacheOff(const GraphCastCacheOff&) = delete;
  GraphCastCacheOff& operator=(const GraphCastCacheOff&) = delete;

 private:
  bool prev_;
};

}  // namespace

std::string graphs_refusal(const Runtime& rt, int64_t world_size, const std::string& key) {
  if (!rt.kernels.graphs) return "";
  if (world_size > 1)
    return key + ": graphs captures one process's micro-step, and this run has " + std::to_string(world_size) +
           " processes (the gradient all-reduce runs on NCCL's streams during backward, outside the capture); drop "
           "graphs from " +
           key + " for a distributed run";
  if (rt.recompute != Recompute::kNone)
    return key + ": graphs cannot capture train.activation_checkpointing=\"" + name(rt.recompute) +
           "\": its recomputation in backward reads and restores the CUDA generator's state, which a capture may not; "
           "set train.activation_checkpointing=none, or drop graphs from " +
           key;
  return "";
}

std::string graphs_refusal(const GradientSync& sync, const std::string& key) {
  if (typeid(sync) == typeid(GradientSync)) return "";
  return key + ": graphs captures one process's micro-step, and this process was launched for a distributed run "
               "(torchrun or SLURM: its gradients go through DDP's reducer, whose hooks a capture would take in); drop "
               "graphs from " +
         key + " for a launched run";
}

#ifdef XSAGPT_CUDA
struct GraphStep::Cuda {
  explicit Cuda(c10::DeviceIndex device) : side(at::cuda::getStreamFromPool(/*isHighPriority=*/false, device)) {}
  at::cuda::CUDAStream side;  // warm-up and capture run here; replays on the caller's stream
  std::unique_ptr<at::cuda::CUDAGraph> graph;
  torch::Tensor loss;  // the graph's output, in its pool
};
#else
struct GraphStep::Cuda {};
#endif

GraphStep::GraphStep(GPT model, std::vector<torch::Tensor> params, int64_t accumulation, const GradientSync& sync)
    : model_(std::move(model)), params_(std::move(params)), accumulation_(accumulation) {
  TORCH_CHECK(accumulation_ >= 1, "GraphStep: accumulation must be >= 1");
  for (const auto& why : {graphs_refusal(model_->runtime(), 1), graphs_refusal(sync)})
    if (!why.empty()) throw ConfigError(why);
}

GraphStep::~GraphStep() = default;

GraphStep::Key GraphStep::key_of(const torch::Tensor& x, const torch::Tensor& y) const {
  Key k{x.sizes().vec(), y.sizes().vec(), model_->runtime(), model_->is_training(), {}};
  for (const auto& p : params_) {
    k.addresses.push_back(p.data_ptr());
    k.addresses.push_back(p.grad().defined() ? p.grad().data_ptr() : nullptr);
  }
  return k;
}

void GraphStep::drop() {
#ifdef XSAGPT_CUDA
  if (cuda_) {
    cuda_->graph.reset();  // its private pool goes back to the allocator
    cuda_->loss = torch::Tensor();
  }
#endif
  warm_ = 0;
}

torch::Tensor GraphStep::micro_step(const torch::Tensor& x, const torch::Tensor& y) {
  {
    torch::NoGradGuard no_grad;  // gradients where backward will add into them
    for (auto& p : params_)
      if (p.requires_grad() && !p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
  }
  if (auto key = key_of(x, y); !(key == key_)) {
    drop();
    if (auto why = graphs_refusal(model_->runtime(), 1); !why.empty()) throw ConfigError(why);
    key_ = std::move(key);
    x_ = torch::empty(x.sizes(), x.options());
    y_ = torch::empty(y.sizes(), y.options());
  }
  x_.copy_(x);
  y_.copy_(y);
  if (x_.is_cuda()) return on_cuda();
  return eager();
}

torch::Tensor GraphStep::eager() {
  auto loss = model_->forward(x_, y_).loss / static_cast<double>(accumulation_);  // as TrainStep's eager micro-step
  loss.backward();
  return loss.detach();
}

void GraphStep::zero_grad() {
  std::vector<torch::Tensor> grads;
  for (const auto& p : params_)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (!grads.empty()) at::_foreach_zero_(grads);
}

std::pair<uint64_t, uint64_t> GraphStep::pool() const {
#ifdef XSAGPT_CUDA
  if (cuda_ && cuda_->graph) {
    const auto id = cuda_->graph->pool();
    return {id.first, id.second};
  }
#endif
  return {0, 0};
}

#ifdef XSAGPT_CUDA
torch::Tensor GraphStep::on_cuda() {
  const auto device = x_.device().index();
  if (!cuda_) cuda_ = std::make_unique<Cuda>(device);
  auto& c = *cuda_;
  const auto ambient = at::cuda::getCurrentCUDAStream(device);
  if (c.graph) {  // the batch was copied on this stream, so the replay reads it
    c.graph->replay();
    return c.loss.clone();
  }
  at::cuda::CUDAEvent ready;  // the side stream starts after the batch's copies and the last optimizer step
  ready.record(ambient);
  ready.block(c.side);
  if (warm_ < kWarmup) {
    torch::Tensor loss;
    {
      c10::cuda::CUDAStreamGuard on_side(c.side);
      loss = eager();
    }
    at::cuda::CUDAEvent done;  // the optimizer reads the gradients on the ambient stream
    done.record(c.side);
    done.block(ambient);
    ++warm_;
    return loss.clone();
  }
  // Nothing pending, and the warm-up's cached blocks back to the device, so the
  // graph's pool does not sit beside an equal amount of cached memory.
  c10::cuda::device_synchronize();
  c10::cuda::CUDACachingAllocator::emptyCache();
  auto graph = std::make_unique<at::cuda::CUDAGraph>();
  {
    c10::cuda::CUDAStreamGuard on_side(c.side);
    GraphCastCacheOff no_cast_cache;
    graph->capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
    try {
      c.loss = eager();  // recorded, not run
    } catch (...) {
      c.loss = torch::Tensor();
      try {
        graph->capture_end();  // the stream must leave capture mode whatever failed inside
      } catch (...) {
      }
      throw;
    }
    graph->capture_end();
  }
  c.graph = std::move(graph);
  ++captures_;
  c.graph->replay();  // this micro-step's work, on the ambient stream
  return c.loss.clone();
}
#else
torch::Tensor GraphStep::on_cuda() {
  TORCH_CHECK(false, "GraphStep: this build has no CUDA support");
  return {};
}
#endif

}  // namespace xsagpt
