// The Huber-loss fit of Chinchilla's loss surface by L-BFGS (stats/huber_surface.h).
#include "stats/huber_surface.h"

#include "stats/huber_lbfgs.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace xsagpt {

double Surface::loss(double n, double d) const { return E + A * std::pow(n, -alpha) + B * std::pow(d, -beta); }

std::pair<double, double> Surface::optimal(double compute) const {
  const double g = std::pow(alpha * A / (beta * B), 1 / (alpha + beta));
  const double n = g * std::pow(compute / 6, beta / (alpha + beta));
  return {n, compute / 6 / n};
}

PowerLaw Surface::frontier() const {
  const double g = std::pow(alpha * A / (beta * B), 1 / (alpha + beta));
  const double gamma = alpha * beta / (alpha + beta);
  const double k = A * std::pow(g, -alpha) + B * std::pow(g, beta);
  return PowerLaw{E, k * std::pow(6.0, gamma), gamma};
}

double huber_surface_objective(const std::vector<SurfacePoint>& points, const Surface& law, double delta) {
  double total = 0;
  for (const auto& p : points) total += huber(std::log(law.loss(p.params, p.tokens)) - std::log(p.loss), delta);
  return total;
}

namespace {

// The points as float64 tensors, N and D measured from their references.
struct SurfaceData {
  torch::Tensor x, y, log_loss;
  double log_n_ref = 0, log_d_ref = 0;
};

struct SurfaceEnd {
  double e = 0, a = 0, b = 0, alpha = 0, beta = 0, value = std::numeric_limits<double>::infinity();
};

// One L-BFGS run from a start; with fixed_e, e stays where it starts.
SurfaceEnd surface_descend(const SurfaceData& d, const SurfaceEnd& start, bool fixed_e, double delta) {
  const auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  auto e = torch::tensor(start.e, opts), a = torch::tensor(start.a, opts), b = torch::tensor(start.b, opts);
  auto alpha = torch::tensor(start.alpha, opts), beta = torch::tensor(start.beta, opts);
  std::vector<torch::Tensor> params{a.requires_grad_(), b.requires_grad_(), alpha.requires_grad_(),
                                    beta.requires_grad_()};
  if (!fixed_e) params.push_back(e.requires_grad_());
  SurfaceEnd end;
  end.value = lbfgs_descend(params, [&] {
    const auto pred = torch::logsumexp(torch::stack({a - alpha * d.x, b - beta * d.y, e.expand_as(d.x)}), 0);
    return scaled_huber_objective(pred, d.log_loss, delta);
  });
  end.e = e.item<double>(), end.a = a.item<double>(), end.b = b.item<double>();
  end.alpha = alpha.item<double>(), end.beta = beta.item<double>();
  return end;
}

// The best end from the grid of starts; E free, or held at `cap` (fixed_e).
SurfaceEnd best_surface(const SurfaceData& d, const std::vector<SurfacePoint>& pts, double cap, bool fixed_e,
                        double delta, int& starts) {
  SurfaceEnd best;
  const std::vector<double> e_fractions = fixed_e ? std::vector<double>{1.0} : std::vector<double>{0.1, 0.5, 0.9};
  for (double frac : e_fractions) {
    const double E0 = frac * cap;
    // a and b: the mean log excess over E0, half of it to each term at the reference sizes.
    double excess = 0;
    for (const auto& p : pts)
      excess += std::log(std::max(p.loss - E0, 1e-3 * cap) / 2) / static_cast<double>(pts.size());
    for (double alpha0 : {0.15, 0.5})
      for (double beta0 : {0.15, 0.5}) {
        ++starts;
        const auto end = surface_descend(d, {std::log(E0), excess, excess, alpha0, beta0}, fixed_e, delta);
        if (end.value < best.value) best = end;
      }
  }
  return best;
}

}  // namespace

SurfaceFit fit_huber_surface(const std::vector<SurfacePoint>& pts, double delta) {
  SurfaceFit fit;
  fit.points = pts.size();
  std::set<double> ns, ds;
  double cap = std::numeric_limits<double>::infinity();
  for (const auto& p : pts) ns.insert(p.params), ds.insert(p.tokens), cap = std::min(cap, p.loss);
  if (pts.size() < kSurfaceMinPoints) {
    fit.why = fmt::format("{} points needed to fit E, A, alpha, B and beta with a residual, {} here", kSurfaceMinPoints,
                          pts.size());
    return fit;
  }
  if (ns.size() < 3 || ds.size() < 3) {
    fit.why = fmt::format("3 distinct parameter counts and 3 distinct token counts needed, {} and {} here", ns.size(),
                          ds.size());
    return fit;
  }
  for (const auto& p : pts)
    if (!(p.params > 0) || !(p.tokens > 0) || !(p.loss > 0) || !std::isfinite(p.params) || !std::isfinite(p.tokens) ||
        !std::isfinite(p.loss)) {
      fit.why = "every parameter count, token count and loss must be a positive number (the fit is on their logs)";
      return fit;
    }
  fit.e_cap = cap;
  SurfaceData d;
  const double n = static_cast<double>(pts.size());
  for (const auto& p : pts) d.log_n_ref += std::log(p.params) / n, d.log_d_ref += std::log(p.tokens) / n;
  std::vector<double> x, y, l;
  for (const auto& p : pts) {
    x.push_back(std::log(p.params) - d.log_n_ref);
    y.push_back(std::log(p.tokens) - d.log_d_ref);
    l.push_back(std::log(p.loss));
  }
  const auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  d.x = torch::tensor(x, opts), d.y = torch::tensor(y, opts), d.log_loss = torch::tensor(l, opts);
  auto best = best_surface(d, pts, cap, false, delta, fit.starts);
  if (std::isfinite(best.value) && std::exp(best.e) > cap) {
    best = best_surface(d, pts, cap, true, delta, fit.starts);
    fit.e_capped = true;
  }
  if (!std::isfinite(best.value)) {
    fit.why = "L-BFGS reached no finite objective from any start";
    return fit;
  }
  if (!(best.alpha > 0) || !(best.beta > 0)) {
    fit.why = fmt::format("the loss does not fall with both parameters and tokens (alpha {:.4g}, beta {:.4g})",
                          best.alpha, best.beta);
    return fit;
  }
  fit.law = Surface{fit.e_capped ? cap : std::exp(best.e), std::exp(best.a + best.alpha * d.log_n_ref), best.alpha,
                    std::exp(best.b + best.beta * d.log_d_ref), best.beta};
  fit.objective = huber_surface_objective(pts, *fit.law, delta);
  return fit;
}

}  // namespace xsagpt
