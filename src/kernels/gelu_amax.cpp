// The exact GELU with its output's amax (see gelu_amax.h).
#include "kernels/gelu_amax.h"

#include "kernels/common.h"
#include "kernels/gelu_amax_cuda.h"

#include <limits>

namespace xsagpt {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct GeluWithAmax : torch::autograd::Function<GeluWithAmax> {
  // amax is filled in place: a statistic of the output, outside the graph.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& amax) {
    const bool kernel = use_cuda_kernel(x) && x.is_contiguous() &&
                        (x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16 ||
                         x.scalar_type() == at::kHalf);
    torch::Tensor h;
    if (kernel) {
      h = at::empty_like(x);
      auto top = amax;
      gelu_amax_cuda(x, h, top);
    } else {
      h = at::gelu(x);
      // Of h as stored, after its rounding: the values the FP8 cast reads.
      amax.copy_(at::linalg_vector_norm(h, std::numeric_limits<double>::infinity(), {}, false, at::kFloat));
    }
    ctx->save_for_backward({x});
    return h;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto x = ctx->get_saved_variables()[0];
    return {at::gelu_backward(grad[0], x), torch::Tensor()};
  }
};

}  // namespace

std::pair<torch::Tensor, torch::Tensor> gelu_with_amax(const torch::Tensor& x) {
  auto guard = no_autocast();
  auto amax = torch::zeros({}, x.options().dtype(torch::kFloat));
  auto h = GeluWithAmax::apply(x, amax);
  return {h, amax};
}

}  // namespace xsagpt
