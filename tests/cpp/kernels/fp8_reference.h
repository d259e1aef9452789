// The FP8 linear layer's arithmetic in float64, written from the recipe rather
// than from kernels/fp8_linear.cpp: each operand scaled so that its largest
// |element| lands on its format's largest value (448 for e4m3, 57344 for e5m2),
// clamped, rounded to the format, multiplied exactly (float64 sums of products of
// FP8 values) and unscaled by both scales. Weights and activations in e4m3,
// gradients in e5m2; the roles can be swapped here so that a test can show the
// swap is visible at its tolerance.
#pragma once

#include <torch/torch.h>

#include <algorithm>

namespace xsagpt::test {

struct Fp8Ref {
  torch::Tensor v;  // the FP8 values, in float64
  double inv;       // 1 / scale: t ~ v * inv
};

inline Fp8Ref fp8_ref_quantize(const torch::Tensor& t, c10::ScalarType fmt) {
  const double top = fmt == c10::ScalarType::Float8_e4m3fn ? 448.0 : 57344.0;
  const auto d = t.to(torch::kCPU, torch::kFloat64);
  const double scale = top / std::max(d.abs().max().item<double>(), 1e-12);
  return {(d * scale).clamp(-top, top).to(fmt).to(torch::kFloat64), 1.0 / scale};
}

struct Fp8RefLinear {
  torch::Tensor y, dx, dw;  // 2-D: rows x out, rows x in, out x in
};

// x (rows, in), w (out, in), gy (rows, out).
inline Fp8RefLinear fp8_ref_linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& gy,
                                   c10::ScalarType forward = c10::ScalarType::Float8_e4m3fn,
                                   c10::ScalarType backward = c10::ScalarType::Float8_e5m2) {
  const auto qx = fp8_ref_quantize(x, forward), qw = fp8_ref_quantize(w, forward);
  const auto qg = fp8_ref_quantize(gy, backward);
  return {qx.v.mm(qw.v.t()) * (qx.inv * qw.inv), qg.v.mm(qw.v) * (qg.inv * qw.inv),
          qg.v.t().mm(qx.v) * (qg.inv * qx.inv)};
}

// Largest error relative to the reference's largest magnitude.
inline double fp8_rel_err(const torch::Tensor& got, const torch::Tensor& want) {
  const auto g = got.to(torch::kCPU, torch::kFloat64), w = want.to(torch::kCPU, torch::kFloat64);
  return (g - w).abs().max().item<double>() / std::max(1e-30, w.abs().max().item<double>());
}

}  // namespace xsagpt::test
