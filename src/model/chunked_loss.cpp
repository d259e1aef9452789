#include "model/chunked_loss.h"

#include <ATen/autocast_mode.h>

namespace xsagpt {

namespace {

// Rows [s, s+n) of the loss: logsumexp - the target's logit, in float32 (float64 for
// float64), 0 for a target of -1. h and w are already in the compute dtype.
torch::Tensor chunk_rows(const torch::Tensor& h, const torch::Tensor& w, const torch::Tensor& targets, int64_t s,
                         int64_t n, c10::ScalarType acc) {
  auto logits = torch::matmul(h.narrow(0, s, n), w.t()).to(acc);
  auto t = targets.narrow(0, s, n);
  auto lse = torch::logsumexp(logits, -1);
  auto picked = logits.gather(1, t.clamp_min(0).unsqueeze(1)).squeeze(1);
  return (lse - picked) * (t != -1);
}

// The compute dtype: autocast's, when it is on, else the hidden states'.
c10::ScalarType compute_dtype(const torch::Tensor& hidden) {
  const auto type = hidden.device().type();
  return at::autocast::is_autocast_enabled(type) ? at::autocast::get_autocast_dtype(type) : hidden.scalar_type();
}

struct ChunkedCrossEntropy : torch::autograd::Function<ChunkedCrossEntropy> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor hidden, torch::Tensor weight,
                               torch::Tensor targets, int64_t chunk, c10::ScalarType dtype) {
    const auto N = hidden.size(0);
    auto valid = (targets != -1);
    auto count = valid.sum().clamp_min(1).to(torch::promote_types(dtype, torch::kFloat32));
    auto h = hidden.to(dtype), w = weight.to(dtype);
    const auto acc = torch::promote_types(dtype, torch::kFloat32);  // float32, or float64 for float64 inputs
    auto total = torch::zeros({}, hidden.options().dtype(acc));
    for (int64_t s = 0; s < N; s += chunk) total += chunk_rows(h, w, targets, s, std::min(chunk, N - s), acc).sum();
    ctx->save_for_backward({hidden, weight, targets, count});
    ctx->saved_data["chunk"] = chunk;
    ctx->saved_data["dtype"] = static_cast<int64_t>(dtype);
    return total / count;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    auto saved = ctx->get_saved_variables();
    auto hidden = saved[0], weight = saved[1], targets = saved[2], count = saved[3];
    const auto chunk = ctx->saved_data["chunk"].toInt();
    const auto dtype = static_cast<c10::ScalarType>(ctx->saved_data["dtype"].toInt());
    const auto N = hidden.size(0);
    auto h = hidden.to(dtype), w = weight.to(dtype);
    const auto acc = torch::promote_types(dtype, torch::kFloat32);
    auto scale = grad_out[0].to(acc) / count;
    auto dh = torch::empty_like(hidden);
    auto dw = torch::zeros(weight.sizes(), weight.options().dtype(acc));
    for (int64_t s = 0; s < N; s += chunk) {
      const auto n = std::min(chunk, N - s);
      auto hc = h.narrow(0, s, n);
      auto t = targets.narrow(0, s, n);
      // d loss / d logits = (softmax - onehot(target)) / count, zero for ignored rows
      auto g = torch::softmax(torch::matmul(hc, w.t()).to(acc), -1);
      g.scatter_add_(1, t.clamp_min(0).unsqueeze(1), -torch::ones({n, 1}, g.options()));
      g.mul_(((t != -1).to(acc) * scale).unsqueeze(1));
      auto gd = g.to(dtype);
      dh.narrow(0, s, n).copy_(torch::matmul(gd, w));
      dw.add_(torch::matmul(gd.t(), hc).to(acc));
    }
    return {dh, dw.to(weight.scalar_type()), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor chunked_cross_entropy(const torch::Tensor& hidden, const torch::Tensor& weight,
                                    const torch::Tensor& targets, int64_t chunk) {
  TORCH_CHECK(hidden.dim() == 2 && weight.dim() == 2 && targets.dim() == 1, "chunked_cross_entropy: shapes");
  TORCH_CHECK(chunk > 0, "chunked_cross_entropy: chunk must be > 0");
  const auto dtype = compute_dtype(hidden);
  // Autocast must not rewrite the matmuls inside; they run in `dtype` explicitly.
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  return ChunkedCrossEntropy::apply(hidden, weight, targets, chunk, dtype);
}

torch::Tensor chunked_token_losses(const torch::Tensor& hidden, const torch::Tensor& weight,
                                   const torch::Tensor& targets, int64_t chunk) {
  TORCH_CHECK(hidden.dim() == 2 && weight.dim() == 2 && targets.dim() == 1, "chunked_token_losses: shapes");
  TORCH_CHECK(chunk > 0, "chunked_token_losses: chunk must be > 0");
  torch::NoGradGuard no_grad;
  const auto dtype = compute_dtype(hidden);
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  const auto acc = torch::promote_types(dtype, torch::kFloat32);
  auto h = hidden.to(dtype), w = weight.to(dtype);
  std::vector<torch::Tensor> rows;
  for (int64_t s = 0; s < h.size(0); s += chunk)
    rows.push_back(chunk_rows(h, w, targets, s, std::min(chunk, h.size(0) - s), acc));
  return rows.empty() ? torch::zeros({0}, hidden.options().dtype(acc)) : torch::cat(rows);
}

}  // namespace xsagpt
