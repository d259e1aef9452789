#include "model/xsa.h"

namespace xsagpt {

torch::Tensor exclude_self_value(const torch::Tensor& y, const torch::Tensor& v, double eps) {
  TORCH_CHECK(y.sizes() == v.sizes(), "XSA: y and v must have the same shape, got ", y.sizes(), " and ",
              v.sizes());
  const auto compute = torch::promote_types(y.scalar_type(), torch::kFloat32);
  auto yf = y.to(compute);
  auto vf = v.to(compute);
  auto v_hat = vf / vf.norm(2, -1, /*keepdim=*/true).clamp_min(eps);
  auto z = yf - (yf * v_hat).sum(-1, /*keepdim=*/true) * v_hat;
  return z.to(y.scalar_type());
}

}  // namespace xsagpt
