// The tanh GELU MLP written out in float64 for the tests of kernels/gelu_mlp.h
// (test_gelu_mlp.cpp on the CPU, test_gelu_mlp_cuda.cpp on a GPU): the formula and
// its derivative by hand, the gradients by the chain rule, no autograd and no
// ATen gelu, so neither the twin nor the kernel is checked against itself.
#pragma once

#include <torch/torch.h>

#include <cmath>

namespace xsagpt::test {

// GPT-2's GELU, 0.5 p (1 + tanh(u)), u = sqrt(2/pi) (p + 0.044715 p^3), and its derivative.
inline torch::Tensor tanh_gelu_f64(const torch::Tensor& p) {
  const auto u = std::sqrt(2.0 / M_PI) * (p + 0.044715 * p.pow(3));
  return 0.5 * p * (1 + u.tanh());
}
inline torch::Tensor tanh_gelu_grad_f64(const torch::Tensor& p) {
  const auto t = (std::sqrt(2.0 / M_PI) * (p + 0.044715 * p.pow(3))).tanh();
  return 0.5 * (1 + t) + 0.5 * p * (1 - t * t) * std::sqrt(2.0 / M_PI) * (1 + 3 * 0.044715 * p * p);
}

struct MlpGrads {
  torch::Tensor y, dx, dw1, db1, dw2, db2;
};

// y = gelu(x W1^T + b1) W2^T + b2 and its gradients for the incoming gradient g, by
// the chain rule written out, in float64.
inline MlpGrads mlp_formula(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& b1,
                            const torch::Tensor& w2, const torch::Tensor& b2, const torch::Tensor& g) {
  auto f = [](const torch::Tensor& t) { return t.defined() ? t.to(torch::kFloat64) : t; };
  const auto X = f(x).reshape({-1, x.size(-1)}), W1 = f(w1), W2 = f(w2), G = f(g).reshape({-1, w2.size(0)});
  auto pre = X.matmul(W1.t());
  if (b1.defined()) pre = pre + f(b1);
  const auto h = tanh_gelu_f64(pre);
  auto y = h.matmul(W2.t());
  if (b2.defined()) y = y + f(b2);
  const auto dpre = G.matmul(W2) * tanh_gelu_grad_f64(pre);
  MlpGrads r;
  r.y = y.view(g.sizes());
  r.dw2 = G.t().matmul(h);
  r.db2 = G.sum(0);
  r.dw1 = dpre.t().matmul(X);
  r.db1 = dpre.sum(0);
  r.dx = dpre.matmul(W1).view(x.sizes());
  return r;
}

}  // namespace xsagpt::test
