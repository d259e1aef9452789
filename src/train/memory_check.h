// Before a GPU run starts: does the model fit? The estimate of model/counts.h
// (what `xsagpt info` prints) for the run's micro-batch and memory options is
// compared with the GPU's memory, and a run that will not fit is told so with
// the keys that shrink it, instead of dying minutes later in the first step with
// an out-of-memory error that names none of them. The whole estimate only warns:
// its activations are an upper bound, and a run that starts anyway may still fit.
// What exists before the first step (weights, gradients, AdamW state, weight
// copies, the RoPE tables of model.block_size positions) is exact, and a run whose
// state alone exceeds the device's memory (the GPU's, or the machine's RAM on the
// CPU) is refused before anything is built.
// train, `sweep --dry-run` and `info` all check through check_memory, so the three
// count a config's memory, and its optimizer's share, the same way.
#pragma once

#include "config/run_config.h"
#include "model/counts.h"

#include <torch/torch.h>

#include <optional>
#include <string>

namespace xsagpt {

struct MemoryCheck {
  MemoryEstimate estimate;
  std::optional<std::string> refusal;  // weights, grads, optimizer state and weight copies alone exceed the device
  std::optional<std::string> warning;  // the whole estimate exceeds what the device holds
};

// A run of `cfg` with runtime `rt` over `world` ranks, on CUDA or not: model/counts.h's
// estimate for its micro-batch with its optimizer's state (Muon's momentum; AdamW's
// split over the ranks with train.shard_optimizer) and, where the device's memory
// `device_bytes` is known, the refusal and the warning below; `device` names it.
MemoryCheck check_memory(const RunConfig& cfg, const Runtime& rt, int64_t world, bool cuda,
                         std::optional<double> device_bytes, const std::string& device);

// The warning for an estimate of `estimate_bytes` on a device of `device_bytes`,
// or nullopt when it fits (with 5% left for the allocator and CUDA's own use).
std::optional<std::string> memory_warning(const RunConfig& cfg, double estimate_bytes, double device_bytes);

// The refusal (the message of a ConfigError) for a model whose state of
// `state_bytes` (MemoryEstimate::state, of which `rope_tables_bytes` are the RoPE
// tables: when they are most of it, the message names model.block_size) cannot fit
// in `device_bytes` of `device`, or nullopt.
std::optional<std::string> memory_refusal(const RunConfig& cfg, double state_bytes, double device_bytes,
                                          const std::string& device, double rope_tables_bytes = 0);

}  // namespace xsagpt
