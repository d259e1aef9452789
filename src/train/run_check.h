// What train refuses about how a run config would run, beyond RunConfig::validate,
// before anything is written: its kernels against the model (config/kernel_fit.h),
// fp8's GEMM shapes and GPU (kernels/fp8_linear.h). `xsagpt info` estimates a run as a GPU would run
// it and asks the same function, so a combination train refuses is never given an
// estimate as if it could run.
#pragma once

#include "config/run_config.h"

#include <torch/torch.h>

#include <optional>
#include <string>

namespace xsagpt {

// Throws ConfigError naming `key` (where the kernels were asked for) when `cfg`, run
// as `rt`, cannot run on `device`; with no device, on a CUDA GPU
// new enough for every kernel (so only what no GPU could run is refused).
void check_runnable(const RunConfig& cfg, const Runtime& rt, const std::optional<torch::Device>& device,
                    const std::string& key = "train.kernels");

}  // namespace xsagpt
