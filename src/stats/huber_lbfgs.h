// The machinery the field's Huber fits share (stats/huber_fit.h's power law in compute,
// stats/huber_surface.h's loss surface in parameters and tokens): the Huber loss of log
// residuals, and one L-BFGS descent (LibTorch's, in float64, strong Wolfe line search)
// from a starting point, which each fit runs from a grid of starts.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

namespace xsagpt {

// The sum of huber_delta(r) over delta^2, r = log_pred - log_loss: the same minimiser as
// the Huber loss, with a quadratic part near 0.5 r^2 rather than 5e-7, so that L-BFGS's
// tolerances are on a sensible scale.
torch::Tensor scaled_huber_objective(const torch::Tensor& log_pred, const torch::Tensor& log_loss, double delta);

// huber_delta(r): r^2 / 2 within delta, delta (|r| - delta / 2) beyond.
double huber(double r, double delta);

// One L-BFGS run moving `params` (float64 scalars that require grad) towards a minimum
// of `objective`; returns the objective there, +inf where it or a parameter is not finite.
double lbfgs_descend(const std::vector<torch::Tensor>& params, const std::function<torch::Tensor()>& objective);

}  // namespace xsagpt
