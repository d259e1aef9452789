#include "kernels/linear.h"

#include "kernels/common.h"

namespace xsagpt {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct CachedLinear : torch::autograd::Function<CachedLinear> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& weight_c, const std::optional<torch::Tensor>& bias) {
    ctx->save_for_backward({x, weight_c});
    ctx->saved_data["weight_dtype"] = static_cast<int64_t>(weight.scalar_type());
    ctx->saved_data["bias_dtype"] = bias ? static_cast<int64_t>(bias->scalar_type()) : int64_t{-1};
    std::optional<torch::Tensor> b;
    if (bias) b = bias->to(x.scalar_type());
    return at::linear(x, weight_c, b);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &wc = saved[1];
    const auto& gy = grad[0];
    const auto g2 = gy.reshape({-1, gy.size(-1)});
    const auto x2 = x.reshape({-1, x.size(-1)});
    auto dx = at::matmul(gy, wc);
    auto dw = torch::empty(wc.sizes(),
                           wc.options().dtype(static_cast<c10::ScalarType>(ctx->saved_data["weight_dtype"].toInt())));
    matmul_into(dw, g2.t(), x2, /*accumulate=*/false);
    torch::Tensor db;
    if (const auto bias_dtype = ctx->saved_data["bias_dtype"].toInt(); bias_dtype >= 0)
      db = g2.sum(0, /*keepdim=*/false, static_cast<c10::ScalarType>(bias_dtype));
    return {dx, dw, torch::Tensor(), db};
  }
};

}  // namespace

torch::Tensor WeightCache::get(const torch::Tensor& param, c10::ScalarType dtype) {
  if (param.scalar_type() == dtype) return param;
  auto it = entries_.find(param.unsafeGetTensorImpl());
  if (it == entries_.end()) {
    torch::NoGradGuard no_grad;
    it = entries_.emplace(param.unsafeGetTensorImpl(), Entry{param, param.detach().to(dtype), param._version()}).first;
  } else if (it->second.version != param._version() || it->second.copy.scalar_type() != dtype ||
             it->second.copy.device() != param.device()) {
    torch::NoGradGuard no_grad;
    auto& e = it->second;
    if (e.copy.scalar_type() != dtype || e.copy.device() != param.device())
      e.copy = param.detach().to(dtype);
    else
      e.copy.copy_(param.detach());
    e.version = param._version();
  }
  return it->second.copy;
}

void WeightCache::refresh() {
  if (entries_.empty()) return;
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> copies, params;
  for (auto& [impl, e] : entries_) {
    copies.push_back(e.copy);
    params.push_back(e.param.detach());
    e.version = e.param._version();
  }
  at::_foreach_copy_(copies, params);
}

int64_t WeightCache::bytes() const {
  int64_t n = 0;
  for (const auto& [impl, e] : entries_) n += e.copy.numel() * static_cast<int64_t>(e.copy.element_size());
  return n;
}

torch::Tensor cached_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& weight_c,
                            const torch::Tensor& bias) {
  if (weight_c.is_same(weight)) return torch::nn::functional::linear(x, weight, bias);
  TORCH_CHECK(x.scalar_type() == weight_c.scalar_type(), "cached_linear: x is ", x.scalar_type(),
              " but the weight copy is ", weight_c.scalar_type());
  auto guard = no_autocast();
  std::optional<torch::Tensor> b;
  if (bias.defined()) b = bias;
  return CachedLinear::apply(x, weight, weight_c, b);
}

void matmul_into(torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& b, bool accumulate) {
  auto guard = no_autocast();
  if (out.scalar_type() == a.scalar_type()) {
    if (accumulate)
      out.addmm_(a, b);
    else
      at::mm_out(out, a, b);
    return;
  }
  // Only the CUDA GEMM has a float32 output for bf16/half inputs (aten::mm.dtype).
  if (!a.is_cuda()) {
    if (accumulate)
      out.add_(at::mm(a, b));
    else
      out.copy_(at::mm(a, b));
    return;
  }
  if (accumulate)
    out.add_(at::mm(a, b, out.scalar_type()));
  else
    at::mm_out(out, a, b, out.scalar_type());
}

}  // namespace xsagpt
