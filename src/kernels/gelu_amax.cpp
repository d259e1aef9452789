// The exact GELU handing over its amaxes (see gelu_amax.h).
#include "kernels/gelu_amax.h"

#include "kernels/amax_handoff.h"
#include "kernels/common.h"
#include "kernels/gelu_amax_cuda.h"

namespace xsagpt {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

bool gelu_kernel_for(const torch::Tensor& x) {
  const auto t = x.scalar_type();
  return use_cuda_kernel(x) && (t == at::kFloat || t == at::kBFloat16 || t == at::kHalf);
}

struct ExactGelu : torch::autograd::Function<ExactGelu> {
  // amax (h's, when asked for) is filled in place: a statistic outside the graph.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x_in,
                               const std::optional<torch::Tensor>& output_amax, bool grad_amax) {
    const auto x = x_in.contiguous();
    auto amax = output_amax.value_or(torch::Tensor());
    torch::Tensor h;
    if (gelu_kernel_for(x)) {
      h = at::empty_like(x);
      gelu_amax_cuda(x, h, amax);
    } else {
      h = at::gelu(x);
      if (amax.defined()) amax.copy_(max_abs(h));
    }
    ctx->save_for_backward({x});
    ctx->saved_data["grad_amax"] = grad_amax;
    return h;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto x = ctx->get_saved_variables()[0];
    auto amax =
        ctx->saved_data["grad_amax"].toBool() ? torch::zeros({}, x.options().dtype(torch::kFloat)) : torch::Tensor();
    torch::Tensor dx;
    if (gelu_kernel_for(x)) {
      const auto dy = grad[0].contiguous();
      dx = at::empty_like(x);
      gelu_backward_amax_cuda(dy, x, dx, amax);
    } else {
      dx = at::gelu_backward(grad[0], x);
      if (amax.defined()) amax.copy_(max_abs(dx));
    }
    if (amax.defined()) hand_over_amax(dx, amax);
    return {dx, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor exact_gelu(const torch::Tensor& x, Fp8Amax amax) {
  auto guard = no_autocast();
  std::optional<torch::Tensor> top;
  if (amax.output) top = torch::zeros({}, x.options().dtype(torch::kFloat));
  auto h = ExactGelu::apply(x, top, amax.input_grad);
  if (top) hand_over_amax(h, *top);  // for the tensor the caller receives
  return h;
}

}  // namespace xsagpt
