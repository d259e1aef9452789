// The Huber-loss power-law fit by L-BFGS (stats/huber_fit.h).
#include "stats/huber_fit.h"

#include "stats/huber_lbfgs.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace xsagpt {

namespace {

// The points as float64 tensors, compute measured from the reference.
struct HuberData {
  torch::Tensor x, log_loss;
  double log_ref = 0;
};

torch::Tensor scaled_objective(const HuberData& d, const torch::Tensor& e, const torch::Tensor& a,
                               const torch::Tensor& alpha, double delta) {
  const auto pred = torch::logsumexp(torch::stack({a - alpha * d.x, e.expand_as(d.x)}), 0);
  return scaled_huber_objective(pred, d.log_loss, delta);
}

struct HuberEnd {
  double e = 0, a = 0, alpha = 0, value = std::numeric_limits<double>::infinity();
};

// One L-BFGS run from (e, a, alpha); with fixed_e, e stays at its start.
HuberEnd huber_descend(const HuberData& d, double e0, double a0, double alpha0, bool fixed_e, double delta) {
  const auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  auto e = torch::tensor(e0, opts), a = torch::tensor(a0, opts), alpha = torch::tensor(alpha0, opts);
  std::vector<torch::Tensor> params{a.requires_grad_(), alpha.requires_grad_()};
  if (!fixed_e) params.push_back(e.requires_grad_());
  HuberEnd end;
  end.value = lbfgs_descend(params, [&] { return scaled_objective(d, e, a, alpha, delta); });
  end.e = e.item<double>(), end.a = a.item<double>(), end.alpha = alpha.item<double>();
  return end;
}

// The best end from the grid of starts; E free, or held at `cap` (fixed_e).
HuberEnd best_of_grid(const HuberData& d, const std::vector<HuberPoint>& pts, double cap, bool fixed_e, double delta,
                 int& starts) {
  HuberEnd best;
  const std::vector<double> e_fractions = fixed_e ? std::vector<double>{1.0} : std::vector<double>{0.1, 0.5, 0.9};
  for (double frac : e_fractions) {
    const double E0 = frac * cap;
    // a: the mean log excess over E0 (the curve's height at the reference compute).
    double a0 = 0;
    for (const auto& p : pts) a0 += std::log(std::max(p.loss - E0, 1e-3 * cap)) / static_cast<double>(pts.size());
    for (double alpha0 : {0.05, 0.2, 0.5, 1.0}) {
      ++starts;
      const auto end = huber_descend(d, std::log(E0), a0, alpha0, fixed_e, delta);
      if (end.value < best.value) best = end;
    }
  }
  return best;
}

}  // namespace

double huber_objective(const std::vector<HuberPoint>& points, const PowerLaw& law, double delta) {
  double total = 0;
  for (const auto& p : points) total += huber(std::log(law.loss(p.compute)) - std::log(p.loss), delta);
  return total;
}

HuberFit fit_huber_power_law(const std::vector<HuberPoint>& pts, double delta) {
  HuberFit fit;
  fit.points = pts.size();
  std::set<double> computes;
  double cap = std::numeric_limits<double>::infinity();
  for (const auto& p : pts) computes.insert(p.compute), cap = std::min(cap, p.loss);
  if (pts.size() < kHuberMinPoints) {
    fit.why = fmt::format("{} points needed for the Huber fit, {} here", kHuberMinPoints, pts.size());
    return fit;
  }
  if (computes.size() < 3) {
    fit.why = fmt::format("3 distinct computes needed to fit E, A and alpha, {} here", computes.size());
    return fit;
  }
  for (const auto& p : pts)
    if (!(p.compute > 0) || !(p.loss > 0) || !std::isfinite(p.compute) || !std::isfinite(p.loss)) {
      fit.why = "every compute and loss must be a positive number (the fit is on their logs)";
      return fit;
    }
  fit.e_cap = cap;
  HuberData d;
  std::vector<double> x, y;
  for (const auto& p : pts) d.log_ref += std::log(p.compute) / static_cast<double>(pts.size());
  for (const auto& p : pts) x.push_back(std::log(p.compute) - d.log_ref), y.push_back(std::log(p.loss));
  const auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  d.x = torch::tensor(x, opts);
  d.log_loss = torch::tensor(y, opts);
  auto best = best_of_grid(d, pts, cap, false, delta, fit.starts);
  if (std::isfinite(best.value) && std::exp(best.e) > cap) {
    best = best_of_grid(d, pts, cap, true, delta, fit.starts);
    fit.e_capped = true;
  }
  if (!std::isfinite(best.value)) {
    fit.why = "L-BFGS reached no finite objective from any start";
    return fit;
  }
  if (!(best.alpha > 0)) {
    fit.why = fmt::format("the loss does not fall with compute (alpha {:.4g} <= 0)", best.alpha);
    return fit;
  }
  fit.law = PowerLaw{fit.e_capped ? cap : std::exp(best.e), std::exp(best.a + best.alpha * d.log_ref), best.alpha};
  fit.objective = huber_objective(pts, *fit.law, delta);
  return fit;
}

}  // namespace xsagpt
