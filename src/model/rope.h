// Rotary position embedding (RoPE, Su et al. 2021) in the "rotate-half" layout:
// the first half of a head's dims is paired with the second half, pair i rotating
// at frequency theta^(-2i/head_dim). Applied to q and k over the full head dim, so
// q.k depends only on the distance between positions.
#pragma once

#include <torch/torch.h>

namespace xsagpt {

// cos and sin tables of shape (max_len, head_dim/2), float32.
std::pair<torch::Tensor, torch::Tensor> rope_tables(int64_t max_len, int64_t head_dim, double theta,
                                                    torch::Device device = torch::kCPU);

// x: (B, H, T, head_dim); cos/sin: (T, head_dim/2) rows for x's positions.
torch::Tensor apply_rope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

}  // namespace xsagpt
