#include "model/rope.h"

namespace xsagpt {

std::pair<torch::Tensor, torch::Tensor> rope_tables(int64_t max_len, int64_t head_dim, double theta,
                                                    torch::Device device) {
  auto opts = torch::TensorOptions().dtype(torch::kFloat64).device(device);
  // Built in float64 so long contexts (16K positions) keep accurate angles, a block of
  // positions at a time, so that building them takes little more memory than the two
  // float32 tables themselves (which the memory check counts: model/counts.h).
  auto inv_freq = torch::pow(theta, -torch::arange(0, head_dim, 2, opts) / static_cast<double>(head_dim));
  auto cos = torch::empty({max_len, head_dim / 2}, opts.dtype(torch::kFloat32));
  auto sin = torch::empty_like(cos);
  constexpr int64_t kBlock = 1 << 16;
  for (int64_t start = 0; start < max_len; start += kBlock) {
    const int64_t n = std::min(kBlock, max_len - start);
    auto angles = torch::outer(torch::arange(start, start + n, opts), inv_freq);
    cos.narrow(0, start, n).copy_(angles.cos());
    sin.narrow(0, start, n).copy_(angles.sin());
  }
  return {cos, sin};
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
