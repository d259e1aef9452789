#include "optim/optimizer.h"

#include "optim/grad_clip.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <optional>

namespace xsagpt {

// State for the fused path: a group per rate factor and weight decay (decay and no
// decay, times μP's factors), lists aligned with params.
struct AdamW::Fused {
  struct Group {
    AdamW::Group settings;
    std::vector<size_t> index;  // into params_
    std::vector<torch::Tensor> exp_avg, exp_avg_sq, step;
  };
  std::vector<Group> groups;
};

namespace {

bool fused_kernel_runs_on(const torch::Device& device) {
  // Probe once with a one-element problem; a device without the kernel throws.
  try {
    auto opts = torch::TensorOptions().device(device);
    std::vector<torch::Tensor> p{torch::zeros({1}, opts)}, g{torch::ones({1}, opts)}, m{torch::zeros({1}, opts)},
        v{torch::zeros({1}, opts)}, s{torch::ones({}, opts)};
    at::_fused_adamw_(p, g, m, v, {}, s, 1e-3, 0.9, 0.95, 0.0, 1e-8, false, false);
    return true;
  } catch (const c10::Error&) {
    return false;
  }
}

}  // namespace

AdamW::AdamW(std::vector<std::pair<std::string, torch::Tensor>> named_params, AdamWConfig cfg) : cfg_(cfg) {
  for (auto& [n, p] : named_params) {
    names_.push_back(n);
    params_.push_back(p);
  }
  TORCH_CHECK(!params_.empty(), "AdamW: no parameters");
  const AdamWImpl impl = cfg.impl == AdamWImpl::kAuto
                             ? (fused_kernel_runs_on(params_[0].device()) ? AdamWImpl::kFused : AdamWImpl::kTorch)
                             : cfg.impl;
  impl_ = name(impl);
  for (const auto& [n, scale] : cfg.rate_scales)
    TORCH_CHECK(scale > 0 && std::isfinite(scale), "AdamW: rate factor ", scale, " for ", n);
  // The groups in order of first appearance: without rate factors, decay then no decay, as before.
  std::vector<Group> order;
  std::vector<size_t> group_index;
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto g = group_of(i);
    const auto at = std::find(order.begin(), order.end(), g);
    group_index.push_back(static_cast<size_t>(at - order.begin()));
    if (at == order.end()) order.push_back(g);
  }
  if (impl == AdamWImpl::kFused) {
    fused_ = std::make_unique<Fused>();
    for (const auto& g : order) fused_->groups.push_back({g});
    for (size_t i = 0; i < params_.size(); ++i) {
      auto& g = fused_->groups[group_index[i]];
      g.index.push_back(i);
      g.exp_avg.push_back(torch::zeros_like(params_[i], torch::MemoryFormat::Preserve));
      g.exp_avg_sq.push_back(torch::zeros_like(params_[i], torch::MemoryFormat::Preserve));
      g.step.push_back(torch::zeros({}, params_[i].options().dtype(torch::kFloat32)));
    }
  } else {
    std::vector<std::vector<torch::Tensor>> members(order.size());
    for (size_t i = 0; i < params_.size(); ++i) members[group_index[i]].push_back(params_[i]);
    std::vector<torch::optim::OptimizerParamGroup> groups;
    for (size_t k = 0; k < order.size(); ++k) {
      groups.emplace_back(members[k], std::make_unique<torch::optim::AdamWOptions>(
                                          torch::optim::AdamWOptions(0.0)
                                              .betas({cfg.beta1, cfg.beta2})
                                              .eps(cfg.eps)
                                              .weight_decay(order[k].weight_decay)));
      torch_rate_scales_.push_back(order[k].rate_scale);
    }
    torch_ = std::make_unique<torch::optim::AdamW>(groups, torch::optim::AdamWOptions(0.0));
  }
}

AdamW::Group AdamW::group_of(size_t i) const {
  const double scale = cfg_.rate_scale(names_[i]);
  return {scale, decays(params_[i]) ? cfg_.weight_decay / scale : 0.0};
}

AdamW::~AdamW() = default;

void AdamW::step(double lr, const torch::Tensor& clip) {
  torch::NoGradGuard no_grad;
  if (torch_) {
    if (clip.defined()) scale_grads(params_, clip);  // torch::optim::AdamW has no grad_scale
    auto& groups = torch_->param_groups();
    for (size_t k = 0; k < groups.size(); ++k)
      static_cast<torch::optim::AdamWOptions&>(groups[k].options()).lr(lr * torch_rate_scales_[k]);
    torch_->step();
    return;
  }
  for (auto& g : fused_->groups) {
    std::vector<torch::Tensor> p, grad, m, v, s;
    for (size_t k = 0; k < g.index.size(); ++k) {
      const auto& param = params_[g.index[k]];
      if (!param.grad().defined()) continue;  // unused this step: leave it and its state alone
      p.push_back(param);
      grad.push_back(param.grad());
      m.push_back(g.exp_avg[k]);
      v.push_back(g.exp_avg_sq[k]);
      s.push_back(g.step[k]);
    }
    if (p.empty()) continue;
    // The kernel divides each gradient by a float32 grad_scale as it reads it (and
    // stores the quotient back). Gradients in another dtype (float64, the tests')
    // take the factor as the separate clip does, so their arithmetic stays that of
    // the clip they are compared with.
    std::optional<torch::Tensor> grad_scale;
    if (clip.defined()) {
      const bool fold = std::all_of(grad.begin(), grad.end(), [](const auto& t) { return t.scalar_type() == torch::kFloat32; });
      if (fold)
        grad_scale = clip.reciprocal();
      else
        at::_foreach_mul_(grad, clip);
    }
    at::_foreach_add_(s, 1);  // the kernel expects the step count already advanced (bias correction)
    at::_fused_adamw_(p, grad, m, v, {}, s, lr * g.settings.rate_scale, cfg_.beta1, cfg_.beta2,
                      g.settings.weight_decay, cfg_.eps,
                      /*amsgrad=*/false, /*maximize=*/false, grad_scale);
  }
}

void AdamW::zero_grad() {
  for (auto& p : params_) p.mutable_grad().reset();
}

AdamWState AdamW::state() const {
  AdamWState s;
  if (fused_) {
    for (const auto& g : fused_->groups) {
      for (size_t k = 0; k < g.index.size(); ++k) {
        const auto& name = names_[g.index[k]];
        s.exp_avg[name] = g.exp_avg[k];
        s.exp_avg_sq[name] = g.exp_avg_sq[k];
        s.step[name] = g.step[k];
      }
    }
    return s;
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    auto it = torch_->state().find(params_[i].unsafeGetTensorImpl());
    if (it == torch_->state().end()) continue;  // not stepped yet
    const auto& st = static_cast<const torch::optim::AdamWParamState&>(*it->second);
    s.exp_avg[names_[i]] = st.exp_avg();
    s.exp_avg_sq[names_[i]] = st.exp_avg_sq();
    s.step[names_[i]] = torch::tensor(static_cast<float>(st.step()));
  }
  return s;
}

void AdamW::load_state(const AdamWState& s) {
  torch::NoGradGuard no_grad;
  auto get = [&](const std::map<std::string, torch::Tensor>& m, const std::string& name, const char* what,
                 const torch::Tensor& like) {
    auto it = m.find(name);
    if (it == m.end()) throw std::runtime_error(std::string("optimizer state: no ") + what + " for parameter " + name);
    if (it->second.sizes() != like.sizes() && like.dim() > 0)
      throw std::runtime_error(std::string("optimizer state: ") + what + " for " + name + " has shape " +
                               c10::str(it->second.sizes()) + ", expected " + c10::str(like.sizes()));
    return it->second.to(like.device(), like.scalar_type());
  };
  if (s.exp_avg.empty()) return;  // checkpoint from before the first step
  if (fused_) {
    for (auto& g : fused_->groups) {
      for (size_t k = 0; k < g.index.size(); ++k) {
        const auto& name = names_[g.index[k]];
        g.exp_avg[k].copy_(get(s.exp_avg, name, "exp_avg", g.exp_avg[k]));
        g.exp_avg_sq[k].copy_(get(s.exp_avg_sq, name, "exp_avg_sq", g.exp_avg_sq[k]));
        g.step[k].copy_(get(s.step, name, "step", g.step[k]));
      }
    }
    return;
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& p = params_[i];
    auto st = std::make_unique<torch::optim::AdamWParamState>();
    st->exp_avg(get(s.exp_avg, names_[i], "exp_avg", p).clone());
    st->exp_avg_sq(get(s.exp_avg_sq, names_[i], "exp_avg_sq", p).clone());
    st->step(static_cast<int64_t>(get(s.step, names_[i], "step", torch::zeros({})).item<double>()));
    torch_->state()[p.unsafeGetTensorImpl()] = std::move(st);
  }
}

}  // namespace xsagpt
