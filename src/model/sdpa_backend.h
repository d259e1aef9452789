// Which kernel scaled_dot_product_attention picks for the model's attention.
// ATen chooses among flash, memory-efficient, cuDNN and the plain math path by
// dtype, head size, mask, dropout and device, silently; the math path on a GPU
// materialises the T x T weights and is several times slower. The trainer asks
// ATen the same question it asks itself (_fused_sdp_choice) for the shapes it is
// about to run, logs the answer, and warns when a GPU run would get the math path.
#pragma once

#include "config/model_config.h"

#include <torch/torch.h>

#include <string>

namespace xsagpt {

// "flash_attention", "efficient_attention", "cudnn_attention", "math", ... for a
// causal attention of this model's heads on `device`, in bf16 (autocast) or float32.
std::string sdpa_backend(const ModelConfig& cfg, const torch::Device& device, bool bf16, double dropout);

}  // namespace xsagpt
