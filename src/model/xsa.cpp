#include "model/xsa.h"

#include "config/runtime.h"
#include "kernels/common.h"
#include "kernels/xsa_cuda.h"

namespace xsagpt {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

torch::ScalarType compute_type(const torch::Tensor& y) {
  return torch::promote_types(y.scalar_type(), torch::kFloat32);
}

void check_shapes(const torch::Tensor& y, const torch::Tensor& v) {
  TORCH_CHECK(y.sizes() == v.sizes(), "XSA: y and v must have the same shape, got ", y.sizes(), " and ", v.sizes());
}

// Row-wise x.w with keepdim, (..., 1).
torch::Tensor rowdot(const torch::Tensor& x, const torch::Tensor& w) { return (x * w).sum(-1, /*keepdim=*/true); }

// The custom function works with v itself rather than v^: with n^2 = max(|v|^2, eps^2),
// (y.v^) v^ = p v for p = y.v / n^2, and the backward of the header becomes, with
// q = g.v / n^2,
//     dL/dy = g - gate q v,     dL/dv = gate (2 p q v - q y - p g)   (no 2pq term below eps)
// so neither pass materialises v^, and every full-size tensor it writes is a result.
//
// With the fused implementations (XsaImpl::kFused: element by element, kFusedWide:
// 16-byte vectors), CUDA inputs go through the kernels of xsa_cuda.h instead (the same formulas, one pass each way);
// they take the gate as one float32 per head.
torch::Tensor gate_per_head(const torch::Tensor& gate, int64_t n_head) {
  return gate.defined() && gate.numel() == n_head ? gate.reshape({-1}).to(torch::kFloat32).contiguous() : gate;
}

bool use_kernels(XsaImpl impl, const torch::Tensor& y, const torch::Tensor& v, const torch::Tensor& gate) {
  return (impl == XsaImpl::kFused || impl == XsaImpl::kFusedWide) && use_cuda_kernel(y) && y.dim() == 4 &&
         y.scalar_type() == v.scalar_type() && y.device() == v.device() &&
         (!gate.defined() || gate.numel() == y.size(1));
}

struct ExcludeSelfValue : torch::autograd::Function<ExcludeSelfValue> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& y, const torch::Tensor& v,
                               const std::optional<torch::Tensor>& gate, double eps, XsaImpl impl) {
    ctx->save_for_backward({y, v, gate.value_or(torch::Tensor())});
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["impl"] = static_cast<int64_t>(impl);  // an IValue holds no enum
    if (use_kernels(impl, y, v, gate.value_or(torch::Tensor())))
      return xsa_forward_cuda(y, v, gate_per_head(gate.value_or(torch::Tensor()), y.size(1)), eps,
                              impl == XsaImpl::kFusedWide);
    const auto ct = compute_type(y);
    auto yf = y.to(ct), vf = v.to(ct);
    auto p = rowdot(yf, vf) / rowdot(vf, vf).clamp_min(eps * eps);
    if (gate) p = p * gate->to(ct);
    return torch::addcmul(yf, vf, p, -1).to(y.scalar_type());  // z = y - gate p v
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    const auto saved = ctx->get_saved_variables();
    const auto &y = saved[0], &v = saved[1], &gate = saved[2];
    const double eps = ctx->saved_data["eps"].toDouble();
    const auto impl = static_cast<XsaImpl>(ctx->saved_data["impl"].toInt());
    if (use_kernels(impl, y, v, gate)) {
      auto [dy, dv, dgate_rows] =
          xsa_backward_cuda(y, v, grad_out[0], gate_per_head(gate, y.size(1)), eps, impl == XsaImpl::kFusedWide);
      torch::Tensor dgate;
      if (gate.defined()) dgate = at::sum_to(dgate_rows.unsqueeze(-1), gate.sizes()).to(gate.scalar_type());
      return {dy, dv, dgate, torch::Tensor(), torch::Tensor()};
    }
    const auto ct = compute_type(y);
    auto yf = y.to(ct), vf = v.to(ct), g = grad_out[0].to(ct);
    auto vv = rowdot(vf, vf);
    auto n2 = vv.clamp_min(eps * eps);
    auto p = rowdot(yf, vf) / n2, q = rowdot(g, vf) / n2;
    auto gq = gate.defined() ? q * gate.to(ct) : q;
    auto gp = gate.defined() ? p * gate.to(ct) : p;

    auto dy = torch::addcmul(g, vf, gq, -1);
    auto dv = yf * gq.neg();
    dv.addcmul_(g, gp, -1);
    // |v| < eps: n is the constant eps and the radial term vanishes.
    dv.addcmul_(vf, torch::where(vv >= eps * eps, 2 * gp * q, torch::zeros_like(q)));
    torch::Tensor dgate;
    if (gate.defined()) dgate = at::sum_to(-(p * q * n2), gate.sizes()).to(gate.scalar_type());  // -sum a s
    return {dy.to(y.scalar_type()), dv.to(v.scalar_type()), dgate, torch::Tensor(), torch::Tensor()};
  }
};

torch::Tensor apply_exclude_self_value(const torch::Tensor& y, const torch::Tensor& v, double eps,
                                       const torch::Tensor& gate, XsaImpl impl) {
  check_shapes(y, v);
  std::optional<torch::Tensor> g;
  if (gate.defined()) g = gate;
  return ExcludeSelfValue::apply(y, v, g, eps, impl);
}

}  // namespace

torch::Tensor exclude_self_value(const torch::Tensor& y, const torch::Tensor& v, double eps,
                                 const torch::Tensor& gate) {
  return apply_exclude_self_value(y, v, eps, gate, XsaImpl::kOps);
}

torch::Tensor exclude_self_value_fused(const torch::Tensor& y, const torch::Tensor& v, double eps,
                                       const torch::Tensor& gate, bool wide) {
  return apply_exclude_self_value(y, v, eps, gate, wide ? XsaImpl::kFusedWide : XsaImpl::kFused);
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
