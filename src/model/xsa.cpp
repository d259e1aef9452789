#include "model/xsa.h"

namespace xsagpt {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

torch::ScalarType compute_type(const torch::Tensor& y) { return torch::promote_types(y.scalar_type(), torch::kFloat32); }

void check_shapes(const torch::Tensor& y, const torch::Tensor& v) {
  TORCH_CHECK(y.sizes() == v.sizes(), "XSA: y and v must have the same shape, got ", y.sizes(), " and ",
              v.sizes());
}

struct ExcludeSelfValue : torch::autograd::Function<ExcludeSelfValue> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& y, const torch::Tensor& v,
                               const std::optional<torch::Tensor>& gate, double eps) {
    ctx->save_for_backward({y, v, gate.value_or(torch::Tensor())});
    ctx->saved_data["eps"] = eps;
    torch::NoGradGuard no_grad;
    return exclude_self_value_autograd(y, v, eps, gate.value_or(torch::Tensor()));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    const auto saved = ctx->get_saved_variables();
    const auto &y = saved[0], &v = saved[1], &gate = saved[2];
    const double eps = ctx->saved_data["eps"].toDouble();
    const auto ct = compute_type(y);
    auto yf = y.to(ct), vf = v.to(ct), g = grad_out[0].to(ct);
    auto norm = vf.norm(2, -1, /*keepdim=*/true);
    auto n = norm.clamp_min(eps);
    auto v_hat = vf / n;
    auto s = (yf * v_hat).sum(-1, true);
    auto a = (g * v_hat).sum(-1, true);
    auto gf = gate.defined() ? gate.to(ct) : torch::ones({}, yf.options());

    // In place on fresh temporaries: besides the two gradients only v^ is ever
    // full-sized, so the backward's own peak stays low as well.
    auto ga = gf * a;
    auto dy = torch::addcmul(g, v_hat, ga, -1);
    // dL/dv^ = -gate (a y + s g); through v^ = v/n with n = ||v|| its component
    // along v^ (-2 gate a s) is removed; with n clamped to eps it is not.
    auto dv = yf * ga;
    dv.addcmul_(g, gf * s).neg_();
    dv.addcmul_(v_hat, torch::where(norm >= eps, 2 * ga * s, torch::zeros_like(s))).div_(n);
    torch::Tensor dgate;
    if (gate.defined()) dgate = at::sum_to(-(a * s), gate.sizes()).to(gate.scalar_type());
    return {dy.to(y.scalar_type()), dv.to(v.scalar_type()), dgate, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor exclude_self_value(const torch::Tensor& y, const torch::Tensor& v, double eps,
                                 const torch::Tensor& gate) {
  check_shapes(y, v);
  std::optional<torch::Tensor> g;
  if (gate.defined()) g = gate;
  return ExcludeSelfValue::apply(y, v, g, eps);
}

torch::Tensor exclude_self_value_autograd(const torch::Tensor& y, const torch::Tensor& v, double eps,
                                          const torch::Tensor& gate) {
  check_shapes(y, v);
  const auto ct = compute_type(y);
  auto yf = y.to(ct);
  auto vf = v.to(ct);
  auto v_hat = vf / vf.norm(2, -1, /*keepdim=*/true).clamp_min(eps);
  auto coef = (yf * v_hat).sum(-1, /*keepdim=*/true);
  if (gate.defined()) coef = coef * gate.to(ct);  // gate = 1 gives plain XSA bit for bit
  auto z = yf - coef * v_hat;
  return z.to(y.scalar_type());
}

}  // namespace xsagpt
