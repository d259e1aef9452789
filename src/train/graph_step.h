// The training micro-step as a CUDA graph (the "graphs" row of train.kernels).
// A micro-step launches the same few thousand kernels in the same order every
// time; from the host each launch costs microseconds (ATen's dispatch, autograd's
// bookkeeping, the launch itself), and where kernels are short the GPU waits for
// them. Captured once with ATen's CUDAGraph (what torch.cuda.graph wraps), every
// later micro-step is a single graph launch.
//
// A graph replays fixed kernels on fixed addresses, so everything it reads or
// writes must stay where it was at capture:
// - the batch: each micro-step copies its x, y into static buffers;
// - the gradients: they exist before capture and are zeroed in place after each
//   optimizer step (zero_grad() here, in place of setting them to none), so every
//   backward adds into them (autograd's in-place accumulate path) and one graph
//   serves every micro-step. The optimizer then sees every parameter with a
//   gradient each step, so AdamW and Muon count every parameter as used (one
//   the forward skipped gets a zero gradient, and decay and moments move);
// - the weights: the optimizers update them in place, and the bf16 and FP8 copies
//   of the weights and fp8 kernels are refreshed in place (Exec::refresh); the
//   RoPE tables are buffers;
// - the loss: the graph's output is a static tensor, copied out after each replay.
// Inside forward and backward nothing may wait for the host: the fused kernels
// and ATen's ops used here check on the device (lm_head_loss's target check is a
// device-side assert), and no .item() is taken.
//
// Capture follows PyTorch's recipe: warm-up micro-steps run eagerly on a side
// stream (cuBLAS's per-stream workspaces, autograd's device thread and lazily made
// state exist before capture), then the cache is emptied and the next micro-step
// is captured on that stream and replayed. Backward runs on autograd's device
// thread, on the stream its forward op ran on, so it is captured too. The capture
// is thread-local (cudaStreamCaptureModeThreadLocal): the data loader's prefetch
// thread pins host memory meanwhile, which global mode would refuse. Autocast's
// cast cache is off while capturing (a cached cast must not outlive the capture).
// Anything the graph baked in changing (the batch's shape, the runtime, training
// mode, the parameters' or gradients' addresses) drops it: the next micro-steps
// warm up and capture again. The graph's private memory pool is freed with it.
//
// Dropout is allowed: CUDAGraph registers the default CUDA generator and moves its
// Philox offset on every replay, so each micro-step draws fresh masks (other
// numbers than an eager step's). Refused (graphs_refusal): several processes, or
// one started by a launcher (the gradient all-reduce is NCCL work hooked into
// backward by DDP's reducer, not captured here), and activation checkpointing (its
// recomputation reads and restores the generator's state, which a capture may not).
//
// On a CPU the same static-buffer step runs without capture: the row's ATen twin,
// what the tests compare with the plain step.
#pragma once

#include "config/runtime.h"
#include "dist/context.h"
#include "model/gpt.h"

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace xsagpt {

// Why train.kernels with graphs cannot run with this runtime on `world_size`
// processes (the message of a ConfigError naming `key`), or "" when it can.
std::string graphs_refusal(const Runtime& rt, int64_t world_size, const std::string& key = "train.kernels");
// The same for the gradient sync the step would bypass: only the single-process
// one, whose backward is loss.backward(), may be; a launched process of one rank
// still has DDP's reducer, whose hooks a capture would take in.
std::string graphs_refusal(const GradientSync& sync, const std::string& key = "train.kernels");

class GraphStep {
 public:
  // Eager micro-steps on the side stream before each capture.
  static constexpr int64_t kWarmup = 2;

  // params: the model's unique parameters (those the optimizer steps); sync: the
  // run's gradient sync, which the step bypasses. Throws ConfigError when the
  // model's runtime or the sync is refused (graphs_refusal).
  GraphStep(GPT model, std::vector<torch::Tensor> params, int64_t accumulation, const GradientSync& sync);
  ~GraphStep();
  GraphStep(const GraphStep&) = delete;
  GraphStep& operator=(const GraphStep&) = delete;

  // One micro-batch (x, y: int64 (B, T) on the model's device): forward and
  // backward of loss / accumulation, its gradients added to the parameters'.
  // Returns that loss, detached, in a tensor of its own.
  torch::Tensor micro_step(const torch::Tensor& x, const torch::Tensor& y);
  // After the optimizer step: every gradient zeroed where it is.
  void zero_grad();

  // How many graphs were captured so far, and the private memory pool of the one
  // held now ({0, 0} without one; CUDA's MempoolId_t). For tests.
  int64_t captures() const { return captures_; }
  std::pair<uint64_t, uint64_t> pool() const;

 private:
  // What a graph bakes in: when any of it changes, the graph is dropped.
  struct Key {
    std::vector<int64_t> x_shape, y_shape;
    Runtime rt;
    bool training = true;
    std::vector<const void*> addresses;  // parameters' and gradients' data
    bool operator==(const Key&) const = default;
  };
  Key key_of(const torch::Tensor& x, const torch::Tensor& y) const;
  torch::Tensor eager();  // forward and backward on the static buffers
  torch::Tensor on_cuda();
  void drop();

  GPT model_;
  std::vector<torch::Tensor> params_;
  int64_t accumulation_;
  Key key_;
  torch::Tensor x_, y_;  // the static inputs
  int64_t warm_ = 0, captures_ = 0;
  struct Cuda;  // the side stream, the graph and its output (graph_step.cpp)
  std::unique_ptr<Cuda> cuda_;
};

}  // namespace xsagpt
