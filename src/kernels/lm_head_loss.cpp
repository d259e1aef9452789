#include "kernels/lm_head_loss.h"

#include "kernels/common.h"
#include "kernels/linear.h"
#include "kernels/lm_head_loss_cuda.h"

namespace xsagpt {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows at a time on a CPU when the caller sets no chunk. A chunk's logits then stay in
// the core's cache from their product through the softmax to the two gradient products
// (at a 2,048-word vocabulary, 1 MiB), while the head's gradient, which every chunk
// adds to, is not reread too often (at 50,304 words, 16 or 32 rows were slower).
// Measured on the CPU ladder's rungs and the quickstart's model: docs/benchmarks.md.
constexpr int64_t kCpuRows = 128;

// The chunks of the LM head: logits of `chunk` rows at a time and each row's loss
// (and, given dh and dw, the gradients of the mean loss with respect to hidden and
// weight, made as the chunk's logits are). Returns the rows' losses, 0 for a target
// of -1; sets inv_count to 1 / the number of the others, on the device.
torch::Tensor head_rows(const torch::Tensor& hidden, const torch::Tensor& weight_c, const torch::Tensor& targets,
                        int64_t chunk, torch::Tensor& inv_count, torch::Tensor& dh, torch::Tensor& dw) {
  const auto compute = weight_c.scalar_type();
  const auto acc = at::toOpMathType(compute);  // float32, or float64 for float64
  const auto h = hidden.to(compute).contiguous();
  const auto N = h.size(0), V = weight_c.size(0);
  chunk = chunk > 0 ? std::min(chunk, N) : h.is_cpu() ? std::min(kCpuRows, N) : N;
  const bool kernel = use_cuda_kernel(h) && compute != torch::kDouble;
  const bool grad = dh.defined();

  // ATen's rule (cross_entropy with ignore_index -1): -1 is ignored, any other
  // target outside [0, V) is an error. Checked on the device without a sync, as
  // ATen's CUDA loss does (a device-side assert); on the CPU it throws here.
  at::_assert_async(((targets >= -1) & (targets < V)).all(),
                    "lm_head_loss: every target must be in [0, vocab_size) or -1 (ignored)");
  auto valid = targets != -1;
  inv_count = valid.sum().clamp_min(1).to(acc).reciprocal();  // on the device: no sync
  auto losses = torch::empty({N}, h.options().dtype(acc));
  auto buffer = torch::empty({std::max<int64_t>(chunk, 1), V}, h.options());
  for (int64_t s = 0; s < N; s += chunk) {
    const auto n = std::min(chunk, N - s);
    auto logits = buffer.narrow(0, 0, n);
    const auto hc = h.narrow(0, s, n);
    at::mm_out(logits, hc, weight_c.t());
    auto rows = losses.narrow(0, s, n);
    const auto t = targets.narrow(0, s, n);
    if (kernel)
      cross_entropy_rows_cuda(logits, t, inv_count, rows, grad);
    else
      cross_entropy_rows_aten(logits, t, inv_count, rows, grad);
    if (!grad) continue;
    auto dhc = dh.narrow(0, s, n);
    at::mm_out(dhc, logits, weight_c);                      // d loss / d hidden
    matmul_into(dw, logits.t(), hc, /*accumulate=*/s > 0);  // d loss / d weight, float32
  }
  return losses;
}

struct LMHeadLoss : torch::autograd::Function<LMHeadLoss> {
  // grad: whether the caller records a graph (decided before apply: inside forward
  // grad mode is off, and a parameter keeps requires_grad() under NoGradGuard, so
  // only the caller can tell evaluation from training).
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& hidden, const torch::Tensor& weight,
                               const torch::Tensor& weight_c, const torch::Tensor& targets, int64_t chunk, bool grad) {
    torch::Tensor dh, dw;
    if (grad) {
      dh = torch::empty(hidden.sizes(), hidden.options().dtype(weight_c.scalar_type()));  // as head_rows' h
      dw = hidden.size(0) == 0 ? torch::zeros(weight.sizes(), weight.options())
                               : torch::empty(weight.sizes(), weight.options());
    }
    torch::Tensor inv_count;
    const auto losses = head_rows(hidden, weight_c, targets, chunk, inv_count, dh, dw);
    if (grad) ctx->save_for_backward({dh, dw});
    ctx->saved_data["hidden_dtype"] = static_cast<int64_t>(hidden.scalar_type());
    return losses.sum() * inv_count;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    auto saved = ctx->get_saved_variables();
    auto &dh = saved[0], &dw = saved[1];
    const auto& g = grad_out[0];
    // forward made the gradients of the loss itself; scale them by the incoming
    // gradient (1 / accumulation steps in training). The scale stays float32 (or
    // float64): cast to bf16 first, 1/3 would become 0.33398 for everything below
    // the head. Out of place, so a second backward (retain_graph) scales the
    // saved gradients once again, not twice.
    const auto hidden_dtype = static_cast<c10::ScalarType>(ctx->saved_data["hidden_dtype"].toInt());
    const auto acc = at::toOpMathType(dh.scalar_type());
    const auto scale = g.to(acc);
    // Multiplied in float32 explicitly: ATen would cast a 0-dim device tensor to bf16.
    auto dhs = (dh.to(acc) * scale).to(hidden_dtype);  // one rounding, of the exact product; dh itself untouched
    return {dhs, dw * scale.to(dw.scalar_type()), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

void cross_entropy_rows_aten(torch::Tensor& logits, const torch::Tensor& targets, const torch::Tensor& inv_count,
                             torch::Tensor& losses, bool write_grad) {
  const auto acc = losses.scalar_type();
  const auto valid = (targets != -1).to(acc);
  const auto t = targets.clamp(0, logits.size(1) - 1).unsqueeze(1);  // ignored rows read column 0, then count 0
  // One pass of exponentials, the softmax's, for both the loss and its gradient (a
  // logsumexp beside it took a second). The loss needs log sum_j exp(x_j), which is
  // max x - log(max p): the largest probability is exp(0) / sum, at least 1/V, so its
  // logarithm is as accurate as the sum, where the target's probability could underflow.
  const auto lf = logits.to(acc);
  auto g = torch::softmax(lf, -1);
  losses.copy_((lf.amax(-1) - g.amax(-1).log_() - lf.gather(1, t).squeeze(1)).mul_(valid));
  if (!write_grad) return;
  g.scatter_add_(1, t, -torch::ones({g.size(0), 1}, g.options()));
  g.mul_((valid * inv_count.to(acc)).unsqueeze(1));
  logits.copy_(g);
}

torch::Tensor lm_head_loss(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& weight_c,
                           const torch::Tensor& targets, int64_t chunk) {
  TORCH_CHECK(hidden.dim() == 2 && weight_c.dim() == 2 && hidden.size(1) == weight_c.size(1) &&
                  weight.sizes() == weight_c.sizes() && targets.dim() == 1 && targets.size(0) == hidden.size(0),
              "lm_head_loss: expected hidden (N, d), weight (V, d), targets (N); got ", hidden.sizes(), ", ",
              weight_c.sizes(), ", ", targets.sizes());
  TORCH_CHECK(chunk >= 0, "lm_head_loss: chunk must be >= 0");
  const bool grad = torch::GradMode::is_enabled() && (hidden.requires_grad() || weight.requires_grad());
  auto guard = no_autocast();
  return LMHeadLoss::apply(hidden, weight, weight_c, targets, chunk, grad);
}

torch::Tensor lm_head_token_losses(const torch::Tensor& hidden, const torch::Tensor& weight_c,
                                   const torch::Tensor& targets, int64_t chunk) {
  TORCH_CHECK(hidden.dim() == 2 && weight_c.dim() == 2 && hidden.size(1) == weight_c.size(1) && targets.dim() == 1 &&
                  targets.size(0) == hidden.size(0),
              "lm_head_token_losses: expected hidden (N, d), weight (V, d), targets (N); got ", hidden.sizes(), ", ",
              weight_c.sizes(), ", ", targets.sizes());
  TORCH_CHECK(chunk >= 0, "lm_head_token_losses: chunk must be >= 0");
  torch::NoGradGuard no_grad;
  auto guard = no_autocast();
  torch::Tensor inv_count, dh, dw;  // no dh, dw: losses only, as lm_head_loss computes them without grad
  return head_rows(hidden, weight_c, targets, chunk, inv_count, dh, dw);
}

}  // namespace xsagpt
