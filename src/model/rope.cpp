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
  // (x1 c - x2 s, x2 c + x1 s) as x [c, c] + [x2, x1] [-s, s]: the same products and
  // sums, bit for bit, in four ops on whole heads instead of seven on halves. The
  // halves come from a split, whose backward is one concatenation; narrowed halves
  // each gave a zero-filled full-size gradient in backward, which at small heads was
  // most of RoPE's time on a CPU.
  const auto c = cos.to(x.scalar_type()), s = sin.to(x.scalar_type());
  const auto halves = x.chunk(2, -1);
  return x * torch::cat({c, c}, -1) + torch::cat({halves[1], halves[0]}, -1) * torch::cat({-s, s}, -1);
}

}  // namespace xsagpt
