#include "kernels/add_norm.h"

#include "kernels/add_norm_cuda.h"
#include "kernels/amax_handoff.h"
#include "kernels/common.h"

namespace xsagpt {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

bool add_norm_kernel_for(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                         c10::ScalarType out) {
  const bool low = out == torch::kFloat || out == torch::kBFloat16 || out == torch::kHalf;
  return use_cuda_kernel(x) && low && x.scalar_type() == torch::kFloat && weight.scalar_type() == torch::kFloat &&
         (!bias.defined() || bias.scalar_type() == torch::kFloat);
}

struct AddNorm : torch::autograd::Function<AddNorm> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x, const std::optional<torch::Tensor>& branch,
                               const torch::Tensor& weight, const std::optional<torch::Tensor>& bias, double eps,
                               int64_t out_dtype, const std::optional<torch::Tensor>& amax, bool branch_grad_amax,
                               bool rows_in_registers) {
    const auto out = static_cast<c10::ScalarType>(out_dtype);
    const auto d = x.size(-1);
    const auto x2 = x.reshape({-1, d}).contiguous();
    const auto N = x2.size(0);
    const auto b = bias.value_or(torch::Tensor());
    const bool kernel = add_norm_kernel_for(x2, weight, b, out);
    // The branch is added in float32 on both paths, whatever its dtype: the kernel
    // reads float32 or the compute dtype as they come, anything else is widened.
    torch::Tensor br;
    if (branch) {
      const auto bt = branch->scalar_type();
      br = branch->reshape({-1, d}).to(kernel && bt != out ? x2.scalar_type() : bt).contiguous();
    }
    auto h = torch::empty({N, d}, x2.options().dtype(out));
    auto mean = torch::empty({N}, x2.options()), rstd = torch::empty({N}, x2.options());
    auto x_out = branch ? torch::empty_like(x2) : x2;
    // A statistic of the output, outside the graph: filled in place, no gradient.
    auto top = amax.value_or(torch::Tensor());
    if (kernel)
      add_norm_forward_cuda(x2, br, weight, b, eps, x_out, h, mean, rstd, top, rows_in_registers);
    else
      add_norm_forward_aten(x2, br, weight, b, eps, x_out, h, mean, rstd, top);

    ctx->save_for_backward({x_out, mean, rstd, weight});
    ctx->saved_data["branch_dtype"] = branch ? static_cast<int64_t>(branch->scalar_type()) : int64_t{-1};
    ctx->saved_data["bias"] = bias.has_value();
    ctx->saved_data["kernel"] = kernel;
    ctx->saved_data["branch_grad_amax"] = branch_grad_amax;
    ctx->saved_data["sizes"] = x.sizes().vec();
    if (!branch) return {h.view(x.sizes())};
    return {x_out.view(x.sizes()), h.view(x.sizes())};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const auto &x_out = saved[0], &mean = saved[1], &rstd = saved[2], &weight = saved[3];
    const auto branch_dtype = ctx->saved_data["branch_dtype"].toInt();
    const bool has_branch = branch_dtype >= 0, has_bias = ctx->saved_data["bias"].toBool();
    const auto N = x_out.size(0), d = x_out.size(1);
    const auto sizes = ctx->saved_data["sizes"].toIntVector();
    auto rows = [&](const torch::Tensor& g) { return g.defined() ? g.reshape({N, d}).contiguous() : g; };
    const auto dx_out = has_branch ? rows(grad[0]) : torch::Tensor();
    const auto dh = rows(has_branch ? grad[1] : grad[0]);

    torch::Tensor dx, dbranch, dw, db, dbranch_amax;
    if (!dh.defined()) {  // only x_out was used: the norm contributes nothing
      dx = dx_out;
    } else {
      // Rows too wide for the kernel (add_norm_cuda.h) take the twin.
      const bool kernel = ctx->saved_data["kernel"].toBool() && add_norm_backward_cuda_fits(d);
      dx = torch::empty_like(x_out);
      // A branch in dh's dtype gets its gradient written by the same pass; any other
      // (float32) is x's gradient itself, taken from dx below without a rounding.
      if (has_branch && branch_dtype == static_cast<int64_t>(dh.scalar_type()) &&
          dh.scalar_type() != x_out.scalar_type())
        dbranch = torch::empty({N, d}, dh.options());
      dw = torch::empty_like(weight);
      if (has_bias) db = torch::empty_like(weight);
      // The branch's gradient's amax, for the FP8 product that made the branch: only
      // where this pass writes that gradient itself, in the compute dtype.
      if (dbranch.defined() && ctx->saved_data["branch_grad_amax"].toBool())
        dbranch_amax = torch::zeros({}, dx.options().dtype(torch::kFloat));
      if (kernel)
        add_norm_backward_cuda(dh, dx_out, x_out, mean, rstd, weight, dx, dbranch, dw, db, dbranch_amax);
      else
        add_norm_backward_aten(dh, dx_out, x_out, mean, rstd, weight, dx, dbranch, dw, db, dbranch_amax);
    }
    if (has_branch && dx.defined())
      dbranch = (dbranch.defined() ? dbranch : dx).to(static_cast<c10::ScalarType>(branch_dtype)).view(sizes);
    if (dx.defined()) dx = dx.view(sizes);
    if (dbranch_amax.defined()) hand_over_amax(dbranch, dbranch_amax);
    return {dx, dbranch, dw, db, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

void add_norm_forward_aten(const torch::Tensor& x, const torch::Tensor& branch, const torch::Tensor& weight,
                           const torch::Tensor& bias, double eps, torch::Tensor& x_out, torch::Tensor& h,
                           torch::Tensor& mean, torch::Tensor& rstd, torch::Tensor& amax) {
  const auto acc = x.scalar_type();
  auto xo = branch.defined() ? x + branch.to(acc) : x;
  if (branch.defined()) x_out.copy_(xo);
  const auto m = xo.mean(-1, /*keepdim=*/true);
  const auto xc = xo - m;
  const auto r = ((xc * xc).mean(-1, /*keepdim=*/true) + eps).rsqrt();
  auto y = xc * r * weight.to(acc);
  if (bias.defined()) y = y + bias.to(acc);
  h.copy_(y);
  // Of h as stored, after its rounding: the values the FP8 cast reads.
  if (amax.defined()) amax.copy_(at::maximum(amax, max_abs(h).reshape(amax.sizes())));
  mean.copy_(m.squeeze(-1));
  rstd.copy_(r.squeeze(-1));
}

void add_norm_backward_aten(const torch::Tensor& dh, const torch::Tensor& dx_out, const torch::Tensor& x_out,
                            const torch::Tensor& mean, const torch::Tensor& rstd, const torch::Tensor& weight,
                            torch::Tensor& dx, torch::Tensor& dbranch, torch::Tensor& dweight, torch::Tensor& dbias,
                            torch::Tensor& dbranch_amax) {
  const auto acc = x_out.scalar_type();
  const auto r = rstd.unsqueeze(-1);
  const auto xhat = (x_out - mean.unsqueeze(-1)) * r;
  const auto g = dh.to(acc);
  const auto gw = g * weight.to(acc);
  auto d = r * (gw - gw.mean(-1, /*keepdim=*/true) - xhat * (gw * xhat).mean(-1, /*keepdim=*/true));
  if (dx_out.defined()) d = d + dx_out.to(acc);
  dx.copy_(d);
  if (dbranch.defined()) dbranch.copy_(d);
  if (dbranch_amax.defined())  // of the gradient as stored, after its rounding
    dbranch_amax.copy_(at::maximum(dbranch_amax, max_abs(dbranch).reshape(dbranch_amax.sizes())));
  dweight.copy_((g * xhat).sum(0));
  if (dbias.defined()) dbias.copy_(g.sum(0));
}

std::pair<torch::Tensor, torch::Tensor> add_layer_norm(const torch::Tensor& x, const torch::Tensor& branch,
                                                       const torch::Tensor& weight, const torch::Tensor& bias,
                                                       double eps, c10::ScalarType out_dtype, Fp8Amax amax,
                                                       bool rows_in_registers) {
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == x.size(-1), "add_layer_norm: weight must be (", x.size(-1),
              "), got ", weight.sizes());
  TORCH_CHECK(!branch.defined() || branch.sizes() == x.sizes(), "add_layer_norm: branch ", branch.sizes(),
              " does not match x ", x.sizes());
  auto guard = no_autocast();
  std::optional<torch::Tensor> br, b, top;
  if (branch.defined()) br = branch;
  if (bias.defined()) b = bias;
  if (amax.output) top = torch::zeros({}, x.options().dtype(torch::kFloat));
  auto out = AddNorm::apply(x, br, weight, b, eps, static_cast<int64_t>(out_dtype), top,
                            amax.input_grad && branch.defined(), rows_in_registers);
  auto h = branch.defined() ? out[1] : out[0];
  if (top) hand_over_amax(h, *top);
  return {branch.defined() ? out[0] : x, h};
}

}  // namespace xsagpt
