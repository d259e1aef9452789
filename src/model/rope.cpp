#include "model/rope.h"

namespace xsagpt {

std::pair<torch::Tensor, torch::Tensor> rope_tables(int64_t max_len, int64_t head_dim, double theta,
                                                    torch::Device device) {
  auto opts = torch::TensorOptions().dtype(torch::kFloat64).device(device);
  // Built in float64 so long contexts (16K positions) keep accurate angles.
  auto inv_freq = torch::pow(theta, -torch::arange(0, head_dim, 2, opts) / static_cast<double>(head_dim));
  auto angles = torch::outer(torch::arange(max_len, opts), inv_freq);
  return {angles.cos().to(torch::kFloat32), angles.sin().to(torch::kFloat32)};
}

torch::Tensor apply_rope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const auto half = x.size(-1) / 2;
  auto x1 = x.narrow(-1, 0, half);
  auto x2 = x.narrow(-1, half, half);
  auto c = cos.to(x.scalar_type());
  auto s = sin.to(x.scalar_type());
  return torch::cat({x1 * c - x2 * s, x2 * c + x1 * s}, -1);
}

}  // namespace xsagpt
