#include "optim/muon.h"

#include "model/attention_kinds.h"

#include <cmath>

namespace xsagpt {

bool muon_updates(const std::string& name, const torch::Tensor& p) {
  if (p.dim() != 2 || !name.starts_with("transformer.h.")) return false;
  // A parameter of an attention kind's step, registered on the layer's attention:
  // Muon's only where the kind's row says so.
  const auto attn = name.rfind(".attn.");
  const std::string own = attn == std::string::npos ? "" : name.substr(attn + 6);
  const auto* step = own.find('.') == std::string::npos ? find_step_parameter(own) : nullptr;
  return !step || step->muon;
}

int64_t muon_blocks(const std::string& name) { return name.ends_with(".attn.c_attn.weight") ? 3 : 1; }

double muon_adjusted_lr(double lr, MuonAdjustLr adjust, int64_t rows, int64_t cols) {
  const double a = static_cast<double>(rows), b = static_cast<double>(cols);
  if (adjust == MuonAdjustLr::kMatchRmsAdamW) return lr * 0.2 * std::sqrt(std::max(a, b));
  return lr * std::sqrt(std::max(1.0, a / b));
}

torch::Tensor newton_schulz(const torch::Tensor& batch, int64_t steps) {
  TORCH_CHECK(batch.dim() == 3 && batch.size(1) <= batch.size(2),
              "newton_schulz: expected (N, rows, cols), rows <= cols");
  // The norm in float32 at least: a bf16 sum of squares over a large matrix loses digits.
  const auto norm_dtype = batch.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  // linalg_vector_norm widens bf16 inside its reduction (no float32 copy of the
  // batch), and the division is in the batch's dtype, as torch.optim.Muon divides
  // its bf16 update: the Newton-Schulz work stays a few copies of the batch.
  const auto norm = torch::linalg_vector_norm(batch, 2, {1, 2}, /*keepdim=*/true, norm_dtype).clamp_min(kNsEps);
  auto x = batch / norm.to(batch.scalar_type());
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
  // Every matrix Muon sees, grouped by shape as the batched iterations take them
  // (tall ones turned on their side): views of its weight, gradient and momentum.
  struct Block {
    torch::Tensor param, grad, momentum;
    bool tall;
  };
  std::map<std::pair<int64_t, int64_t>, std::vector<Block>> groups;
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& [name, p] = params_[i];
    if (!p.grad().defined()) continue;  // unused this step: leave it and its momentum alone
    momentum_[i].lerp_(p.grad(), 1.0 - cfg_.momentum);
    const int64_t n = muon_blocks(name), rows = p.size(0) / n, cols = p.size(1);
    const auto ps = p.chunk(n, 0), gs = p.grad().chunk(n, 0), ms = momentum_[i].chunk(n, 0);
    for (int64_t b = 0; b < n; ++b)
      groups[{std::min(rows, cols), std::max(rows, cols)}].push_back({ps[b], gs[b], ms[b], rows > cols});
  }
  // One group at a time, so the work in flight is one group's stack and its
  // iterations (model/counts.h estimates it), not a copy of every matrix at once.
  const auto dtype = ns_dtype();
  for (const auto& [shape, blocks] : groups) {
    auto stack = torch::empty({static_cast<int64_t>(blocks.size()), shape.first, shape.second},
                              blocks.front().param.options().dtype(dtype));
    for (size_t k = 0; k < blocks.size(); ++k) {
      const auto nesterov = blocks[k].grad.lerp(blocks[k].momentum, cfg_.momentum);
      stack[static_cast<int64_t>(k)].copy_(blocks[k].tall ? nesterov.t() : nesterov);
    }
    const auto ortho = newton_schulz(stack, cfg_.ns_steps);
    stack.reset();
    for (size_t k = 0; k < blocks.size(); ++k) {
      auto w = blocks[k].param;
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
