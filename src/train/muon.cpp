#include "train/muon.h"

#include <cmath>

namespace xsagpt {

bool muon_updates(const std::string& name, const torch::Tensor& p) {
  return p.dim() == 2 && name.starts_with("transformer.h.");
}

int64_t muon_blocks(const std::string& name) { return name.ends_with(".attn.c_attn.weight") ? 3 : 1; }

double muon_adjusted_lr(double lr, const std::string& adjust, int64_t rows, int64_t cols) {
  const double a = static_cast<double>(rows), b = static_cast<double>(cols);
  if (adjust == "match_rms_adamw") return lr * 0.2 * std::sqrt(std::max(a, b));
  return lr * std::sqrt(std::max(1.0, a / b));
}

torch::Tensor newton_schulz(const torch::Tensor& batch, int64_t steps) {
  TORCH_CHECK(batch.dim() == 3 && batch.size(1) <= batch.size(2),
              "newton_schulz: expected (N, rows, cols), rows <= cols");
  // The norm in float32 at least: a bf16 sum of squares over a large matrix loses digits.
  const auto norm_dtype = batch.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const auto norm = torch::linalg_vector_norm(batch.to(norm_dtype), 2, {1, 2}, /*keepdim=*/true).clamp_min(kNsEps);
  auto x = (batch.to(norm_dtype) / norm).to(batch.scalar_type());
  for (int64_t i = 0; i < steps; ++i) {
    const auto gram = torch::bmm(x, x.transpose(1, 2));
    const auto poly = torch::baddbmm(gram, gram, gram, /*beta=*/kNsB, /*alpha=*/kNsC);  // b A + c A^2
    x = torch::baddbmm(x, poly, x, /*beta=*/kNsA, /*alpha=*/1.0);                       // a X + poly X
  }
  return x;
}

Muon::Muon(std::vector<std::pair<std::string, torch::Tensor>> named_params, MuonConfig cfg)
    : params_(std::move(named_params)), cfg_(std::move(cfg)) {
  for (const auto& [name, p] : params_) {
    TORCH_CHECK(p.dim() == 2 && p.size(0) % muon_blocks(name) == 0, "Muon: ", name, " is not a matrix of ",
                muon_blocks(name), " blocks");
    momentum_.push_back(torch::zeros_like(p, torch::MemoryFormat::Preserve));
  }
}

torch::ScalarType Muon::ns_dtype() const {
  if (params_.empty()) return torch::kFloat32;
  const auto& p = params_.front().second;
  if (p.is_cuda()) return torch::kBFloat16;
  return p.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
}

void Muon::step(double lr) {
  torch::NoGradGuard no_grad;
  // One entry per matrix Muon sees: the parameter's view and its momentum update,
  // grouped by shape as the batched iterations take them (tall ones transposed).
  struct Block {
    torch::Tensor param, update;
    bool tall;
  };
  std::map<std::pair<int64_t, int64_t>, std::vector<Block>> groups;
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& [name, p] = params_[i];
    if (!p.grad().defined()) continue;  // unused this step: leave it and its momentum alone
    const auto& g = p.grad();
    momentum_[i].lerp_(g, 1.0 - cfg_.momentum);
    const auto nesterov = g.lerp(momentum_[i], cfg_.momentum);
    const auto n = muon_blocks(name);
    auto views = p.chunk(n, 0);
    auto updates = nesterov.chunk(n, 0);
    for (int64_t b = 0; b < n; ++b) {
      const bool tall = views[b].size(0) > views[b].size(1);
      auto u = tall ? updates[b].t() : updates[b];
      groups[{u.size(0), u.size(1)}].push_back({views[b], u, tall});
    }
  }
  const auto dtype = ns_dtype();
  for (auto& [shape, blocks] : groups) {
    std::vector<torch::Tensor> us;
    for (const auto& b : blocks) us.push_back(b.update.to(dtype));
    const auto ortho = newton_schulz(torch::stack(us), cfg_.ns_steps);
    for (size_t k = 0; k < blocks.size(); ++k) {
      auto& w = blocks[k].param;
      auto o = blocks[k].tall ? ortho[static_cast<int64_t>(k)].t() : ortho[static_cast<int64_t>(k)];
      w.mul_(1.0 - lr * cfg_.weight_decay);
      w.add_(o.to(w.scalar_type()), -muon_adjusted_lr(lr, cfg_.adjust_lr, w.size(0), w.size(1)));
    }
  }
}

std::map<std::string, torch::Tensor> Muon::state() const {
  std::map<std::string, torch::Tensor> s;
  for (size_t i = 0; i < params_.size(); ++i) s[params_[i].first] = momentum_[i];
  return s;
}

void Muon::load_state(const std::map<std::string, torch::Tensor>& momentum) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& name = params_[i].first;
    const auto it = momentum.find(name);
    if (it == momentum.end()) throw std::runtime_error("optimizer state: no Muon momentum for parameter " + name);
    if (it->second.sizes() != momentum_[i].sizes())
      throw std::runtime_error("optimizer state: Muon momentum for " + name + " has shape " +
                               c10::str(it->second.sizes()) + ", expected " + c10::str(momentum_[i].sizes()));
    momentum_[i].copy_(it->second);
  }
}

}  // namespace xsagpt
