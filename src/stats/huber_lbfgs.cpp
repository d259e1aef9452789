// The Huber loss of log residuals and one L-BFGS descent (see huber_lbfgs.h).
#include "stats/huber_lbfgs.h"

#include <cmath>
#include <limits>

namespace xsagpt {

torch::Tensor scaled_huber_objective(const torch::Tensor& log_pred, const torch::Tensor& log_loss, double delta) {
  const auto r = (log_pred - log_loss) / delta;
  const auto ar = r.abs();
  return torch::where(ar <= 1, 0.5 * r * r, ar - 0.5).sum();
}

double huber(double r, double delta) {
  return std::fabs(r) <= delta ? 0.5 * r * r : delta * (std::fabs(r) - 0.5 * delta);
}

double lbfgs_descend(const std::vector<torch::Tensor>& params, const std::function<torch::Tensor()>& objective) {
  torch::optim::LBFGS opt(params, torch::optim::LBFGSOptions(1.0)
                                      .max_iter(400)
                                      .max_eval(1000)
                                      .tolerance_grad(1e-10)
                                      .tolerance_change(1e-14)
                                      .history_size(20)
                                      .line_search_fn("strong_wolfe"));
  auto closure = [&] {
    opt.zero_grad();
    auto loss = objective();
    loss.backward();
    return loss;
  };
  opt.step(closure);
  torch::NoGradGuard no_grad;
  const double value = objective().item<double>();
  bool finite = std::isfinite(value);
  for (const auto& p : params) finite = finite && std::isfinite(p.item<double>());
  return finite ? value : std::numeric_limits<double>::infinity();
}

}  // namespace xsagpt
