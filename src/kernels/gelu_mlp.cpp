// The MLP with its GELU in the GEMM epilogues (see gelu_mlp.h): the autograd
// function, the ATen twin of its two fused GEMMs, and the choice between them.
#include "kernels/gelu_mlp.h"

#include "kernels/common.h"
#include "kernels/gelu_mlp_cuda.h"
#include "kernels/linear.h"

#include <cstdint>

namespace xsagpt {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

bool aligned16(const torch::Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 16 == 0; }

std::pair<torch::Tensor, torch::Tensor> gelu_up(const torch::Tensor& x2, const torch::Tensor& w1c,
                                                const torch::Tensor& b1c, bool fused) {
  if (!fused) return gelu_up_aten(x2, w1c, b1c);
  auto pre = torch::empty({x2.size(0), w1c.size(0)}, x2.options());
  auto h = torch::empty_like(pre);
  gelu_up_cuda(x2, w1c, b1c, pre, h);
  return {pre, h};
}

struct GeluMlp : torch::autograd::Function<GeluMlp> {
  // w1 and w2 are inputs so that their gradients have a place to go; the GEMMs
  // read the copies w1c, w2c (in x's dtype).
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w1,
                               const torch::Tensor& w1c, const std::optional<torch::Tensor>& b1,
                               const torch::Tensor& w2, const torch::Tensor& w2c,
                               const std::optional<torch::Tensor>& b2) {
    const auto dt = x.scalar_type();
    const auto x2 = x.reshape({-1, x.size(-1)}).contiguous();
    const auto b1c = b1 ? b1->to(dt).contiguous() : torch::Tensor();
    const bool fused = gelu_mlp_cuda_fits(x2, w1c, w2c) && (!b1c.defined() || aligned16(b1c));
    auto [pre, h] = gelu_up(x2, w1c, b1c, fused);
    std::optional<torch::Tensor> b2c;
    if (b2) b2c = b2->to(dt);
    auto y = at::linear(h, w2c, b2c);
    ctx->save_for_backward({x2, w1c, w2c, pre, h});
    ctx->saved_data["fused"] = fused;
    ctx->saved_data["w1_dtype"] = static_cast<int64_t>(w1.scalar_type());
    ctx->saved_data["w2_dtype"] = static_cast<int64_t>(w2.scalar_type());
    ctx->saved_data["b1_dtype"] = b1 ? static_cast<int64_t>(b1->scalar_type()) : int64_t{-1};
    ctx->saved_data["b2_dtype"] = b2 ? static_cast<int64_t>(b2->scalar_type()) : int64_t{-1};
    auto shape = x.sizes().vec();
    shape.back() = w2c.size(0);
    return y.view(shape);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const auto &x2 = saved[0], &w1c = saved[1], &w2c = saved[2], &pre = saved[3], &h = saved[4];
    const auto g2 = grad[0].reshape({-1, grad[0].size(-1)}).contiguous();
    const auto dtype_of = [&](const char* key) { return static_cast<c10::ScalarType>(ctx->saved_data[key].toInt()); };
    const bool with_b1 = ctx->saved_data["b1_dtype"].toInt() >= 0;
    torch::Tensor dpre, db1;
    if (ctx->saved_data["fused"].toBool() && aligned16(g2)) {
      dpre = torch::empty_like(pre);
      torch::Tensor db1c = with_b1 ? torch::empty({pre.size(1)}, pre.options()) : torch::Tensor();
      dgelu_down_cuda(g2, w2c, pre, dpre, db1c);
      if (with_b1) db1 = db1c.to(dtype_of("b1_dtype"));
    } else {
      dpre = dgelu_down_aten(g2, w2c, pre);
      if (with_b1) db1 = dpre.sum(0, /*keepdim=*/false, dtype_of("b1_dtype"));
    }
    auto dw2 = torch::empty(w2c.sizes(), w2c.options().dtype(dtype_of("w2_dtype")));
    matmul_into(dw2, g2.t(), h, /*accumulate=*/false);
    auto dw1 = torch::empty(w1c.sizes(), w1c.options().dtype(dtype_of("w1_dtype")));
    matmul_into(dw1, dpre.t(), x2, /*accumulate=*/false);
    torch::Tensor db2;
    if (ctx->saved_data["b2_dtype"].toInt() >= 0) db2 = g2.sum(0, /*keepdim=*/false, dtype_of("b2_dtype"));
    auto shape = grad[0].sizes().vec();
    shape.back() = w1c.size(1);
    auto dx = at::mm(dpre, w1c).view(shape);
    return {dx, dw1, torch::Tensor(), db1, dw2, torch::Tensor(), db2};
  }
};

}  // namespace

std::pair<torch::Tensor, torch::Tensor> gelu_up_aten(const torch::Tensor& x2, const torch::Tensor& w1c,
                                                     const torch::Tensor& b1c) {
  auto guard = no_autocast();
  std::optional<torch::Tensor> b;
  if (b1c.defined()) b = b1c;
  auto pre = at::linear(x2, w1c, b);
  return {pre, at::gelu(pre, "tanh")};
}

torch::Tensor dgelu_down_aten(const torch::Tensor& g2, const torch::Tensor& w2c, const torch::Tensor& pre) {
  auto guard = no_autocast();
  return at::gelu_backward(at::mm(g2, w2c), pre, "tanh");
}

bool gelu_mlp_cuda_fits(const torch::Tensor& x2, const torch::Tensor& w1c, const torch::Tensor& w2c) {
  if (!use_cuda_kernel(x2)) return false;
  const auto dt = x2.scalar_type();
  if (dt != at::kBFloat16 && dt != at::kHalf) return false;
  for (const auto* t : {&x2, &w1c, &w2c})
    if (t->scalar_type() != dt || !t->is_contiguous() || !aligned16(*t) || !t->is_cuda()) return false;
  return x2.size(1) % 8 == 0 && w1c.size(0) % 8 == 0;
}

torch::Tensor gelu_mlp(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& w1c,
                       const torch::Tensor& b1, const torch::Tensor& w2, const torch::Tensor& w2c,
                       const torch::Tensor& b2) {
  TORCH_CHECK(x.scalar_type() == w1c.scalar_type() && x.scalar_type() == w2c.scalar_type(), "gelu_mlp: x is ",
              x.scalar_type(), " but the weight copies are ", w1c.scalar_type(), " and ", w2c.scalar_type());
  TORCH_CHECK(w1c.dim() == 2 && w2c.dim() == 2 && x.size(-1) == w1c.size(1) && w2c.size(1) == w1c.size(0),
              "gelu_mlp: x (..., ", x.size(-1), "), W1 ", w1c.sizes(), " and W2 ", w2c.sizes(), " do not chain");
  auto guard = no_autocast();
  std::optional<torch::Tensor> ob1, ob2;
  if (b1.defined()) ob1 = b1;
  if (b2.defined()) ob2 = b2;
  return GeluMlp::apply(x, w1, w1c.contiguous(), ob1, w2, w2c.contiguous(), ob2);
}

}  // namespace xsagpt
