#include "kernels/rope_qkv.h"

#include "kernels/amax_handoff.h"
#include "kernels/common.h"
#include "kernels/rope_qkv_cuda.h"

namespace xsagpt {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// (B, T, 3*H*D) -> the (B, T, H, D) view of part `which` (0 q, 1 k, 2 v).
torch::Tensor part(const torch::Tensor& qkv, int64_t which, int64_t H, int64_t D) {
  return qkv.narrow(-1, which * H * D, H * D).view({qkv.size(0), qkv.size(1), H, D});
}

bool rope_kernel_for(const torch::Tensor& t, const torch::Tensor& cos) {
  return use_cuda_kernel(t) && cos.is_cuda() && t.scalar_type() != torch::kDouble;
}

struct RopeQKV : torch::autograd::Function<RopeQKV> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& qkv_in, const torch::Tensor& cos,
                               const torch::Tensor& sin, int64_t H, int64_t D, bool grad_amax) {
    const auto qkv = qkv_in.stride(-1) == 1 ? qkv_in : qkv_in.contiguous();
    const auto B = qkv.size(0), T = qkv.size(1);
    auto q = torch::empty({B, T, H, D}, qkv.options());
    auto k = torch::empty_like(q), v = torch::empty_like(q);
    if (rope_kernel_for(qkv, cos)) {
      rope_qkv_forward_cuda(qkv, cos.contiguous(), sin.contiguous(), q, k, v);
    } else {
      rope_qkv_aten(part(qkv, 0, H, D), part(qkv, 1, H, D), part(qkv, 2, H, D), cos, sin, /*inverse=*/false, q, k, v);
    }
    ctx->save_for_backward({cos, sin});
    ctx->saved_data["H"] = H;
    ctx->saved_data["D"] = D;
    ctx->saved_data["grad_amax"] = grad_amax;
    return {q, k, v};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const auto &cos = saved[0], &sin = saved[1];
    const auto H = ctx->saved_data["H"].toInt(), D = ctx->saved_data["D"].toInt();
    const torch::Tensor* like = nullptr;
    for (const auto& g : grad)
      if (g.defined()) like = &g;
    TORCH_CHECK(like, "rope_qkv backward: no gradient");
    auto get = [&](size_t i) {
      if (!grad[i].defined()) return torch::zeros_like(*like);
      return grad[i].stride(-1) == 1 ? grad[i] : grad[i].contiguous();
    };
    const auto dq = get(0), dk = get(1), dv = get(2);
    const auto B = like->size(0), T = like->size(1);
    auto dqkv = torch::empty({B, T, 3 * H * D}, like->options());
    auto amax =
        ctx->saved_data["grad_amax"].toBool() ? torch::zeros({}, dqkv.options().dtype(torch::kFloat)) : torch::Tensor();
    if (rope_kernel_for(dq, cos)) {
      rope_qkv_backward_cuda(dq, dk, dv, cos.contiguous(), sin.contiguous(), dqkv, amax);
    } else {
      auto oq = part(dqkv, 0, H, D), ok = part(dqkv, 1, H, D), ov = part(dqkv, 2, H, D);
      rope_qkv_aten(dq, dk, dv, cos, sin, /*inverse=*/true, oq, ok, ov);
      // Of the gradient as stored, after its rounding.
      if (amax.defined()) amax.copy_(max_abs(dqkv));
    }
    if (amax.defined()) hand_over_amax(dqkv, amax);
    return {dqkv, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

void rope_qkv_aten(const torch::Tensor& q_in, const torch::Tensor& k_in, const torch::Tensor& v_in,
                   const torch::Tensor& cos, const torch::Tensor& sin, bool inverse, torch::Tensor& q_out,
                   torch::Tensor& k_out, torch::Tensor& v_out) {
  const auto acc = at::toOpMathType(q_in.scalar_type());
  const auto T = q_in.size(1), half = q_in.size(3) / 2;
  const auto c = cos.to(acc).view({1, T, 1, half});
  const auto s = (inverse ? -sin : sin).to(acc).view({1, T, 1, half});
  for (auto [in, out] : {std::pair{&q_in, &q_out}, std::pair{&k_in, &k_out}}) {
    const auto x = in->to(acc);
    const auto x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
    out->narrow(-1, 0, half).copy_(x1 * c - x2 * s);
    out->narrow(-1, half, half).copy_(x2 * c + x1 * s);
  }
  v_out.copy_(v_in);
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> rope_qkv(const torch::Tensor& qkv, int64_t n_head,
                                                                 int64_t head_dim, const torch::Tensor& cos,
                                                                 const torch::Tensor& sin, bool qkv_grad_amax) {
  TORCH_CHECK(qkv.dim() == 3 && qkv.size(2) == 3 * n_head * head_dim && head_dim % 2 == 0,
              "rope_qkv: expected qkv of shape (B, T, 3*", n_head, "*", head_dim, "), got ", qkv.sizes());
  TORCH_CHECK(cos.dim() == 2 && cos.size(0) == qkv.size(1) && cos.size(1) == head_dim / 2 && sin.sizes() == cos.sizes(),
              "rope_qkv: cos/sin must be (T, head_dim/2) = (", qkv.size(1), ", ", head_dim / 2, "), got ", cos.sizes());
  auto guard = no_autocast();
  auto out = RopeQKV::apply(qkv, cos, sin, n_head, head_dim, qkv_grad_amax);
  return {out[0].transpose(1, 2), out[1].transpose(1, 2), out[2].transpose(1, 2)};
}

}  // namespace xsagpt
