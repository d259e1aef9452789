// `xsagpt bench --micro`: each fused kernel alone, as achieved memory bandwidth.
//
// Every kernel in src/kernels/ is memory-bound: it reads its inputs once and
// writes its outputs once, with a few flops per element. So its floor is the
// bytes it must move divided by the device's bandwidth, and the useful figure is
// bytes / time against the bandwidth of a plain device-to-device copy measured in
// the same process (a datasheet number would flatter or shame every kernel
// alike). A kernel far below the copy is doing something other than moving bytes
// (too few warps in flight, uncoalesced or conflicting accesses), and how far
// below says how much a rewrite can win before the step benchmark shows it.
//
// Shapes come from model configs and a batch x sequence length, the ones the step
// benchmark trains, so the rows speak for the real widths: norm at d_model, rope
// and XSA at the config's heads, the loss over a chunk of vocabulary rows.
// The CUDA kernels run where they are built and the tensors are on a GPU; anywhere
// else their ATen twins run instead (a CPU rehearsal of the same table).
#pragma once

#include "config/model_config.h"

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace xsagpt {

struct MicroShape {
  std::string config;  // model config name, as --step-config takes it
  ModelConfig model;
  int64_t batch = 1, seq_len = 1;
};

// "NAME:BxT" (e.g. "gpt2-124m:16x1024"); ConfigError naming `flag` otherwise.
MicroShape parse_micro_shape(const std::string& spec, const std::string& flag);

struct MicroRow {
  std::string kernel;  // e.g. "norm backward"
  std::string shape;   // e.g. "gpt2-124m 16x1024 d768"
  double bytes = 0;    // the fewest bytes the op must move: inputs read once, outputs written once
  double ms = 0;       // median time per launch
  double gb_per_s() const { return bytes / (ms * 1e6); }
};

struct MicroResult {
  std::string implementation;  // "cuda" or "aten twin"
  double copy_gb_per_s = 0;    // a device-to-device copy of `copy_bytes`, read plus written
  double copy_bytes = 0;
  std::vector<MicroRow> rows;
};

// Times norm forward/backward, rope forward/backward, the loss rows (with their
// gradient) and XSA forward/backward at each shape, in bf16 on CUDA (float32 on a
// CPU), each the median of `iters` timings of `inner` back-to-back launches.
MicroResult bench_kernels(const std::vector<MicroShape>& shapes, const torch::Device& device, int64_t iters,
                          int64_t inner);

nlohmann::json to_json(const MicroResult& r);

}  // namespace xsagpt
