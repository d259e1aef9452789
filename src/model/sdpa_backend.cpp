#include "model/sdpa_backend.h"

#include <ATen/SDPBackend.h>

#include <algorithm>

namespace xsagpt {

std::string sdpa_backend(const ModelConfig& cfg, const torch::Device& device, bool bf16, double dropout) {
  // The choice depends on the head shape, dtype and flags, not on B or T (beyond
  // alignment), so a small probe answers for the real batch.
  const int64_t T = std::min<int64_t>(cfg.block_size, 128);
  auto opts = torch::TensorOptions().device(device).dtype(bf16 ? torch::kBFloat16 : torch::kFloat32);
  auto q = torch::empty({1, cfg.n_head, T, cfg.head_dim}, opts).requires_grad_(true);
  switch (static_cast<at::SDPBackend>(at::_fused_sdp_choice(q, q, q, {}, dropout, /*is_causal=*/true))) {
    case at::SDPBackend::flash_attention: return "flash_attention";
    case at::SDPBackend::efficient_attention: return "efficient_attention";
    case at::SDPBackend::cudnn_attention: return "cudnn_attention";
    case at::SDPBackend::math: return "math";
    case at::SDPBackend::overrideable: return "overrideable";
    default: return "none";
  }
}

}  // namespace xsagpt
