// The "xsa" kind: Exclusive Self Attention's step (model/xsa.h) in the layers
// model.xsa_layers selects, with model.xsa_gate's learned per-head gate
// g = tanh(alpha): z = y - g (y.v^) v^ (g = 0 is SA, g = 1 is XSA). The step runs
// as train.kernels chooses (XsaImpl: ATen ops, the fused CUDA kernels, or composed).
#include "model/attention_kinds.h"
#include "model/xsa.h"

#include <fmt/format.h>

namespace xsagpt {

namespace {

XsaGate gate_start(const ModelConfig& c) { return c.spec().option<XsaGate>("xsa_gate"); }

class XsaStep : public AttentionStep {
 public:
  explicit XsaStep(const StepContext& c)
      : exec_(c.exec), eps_(c.cfg.xsa_eps), start_(gate_start(c.cfg)), n_head_(c.cfg.n_head) {
    if (start_ != XsaGate::kOff) alpha_ = c.module.register_parameter("xsa_gate", torch::zeros({n_head_}));
  }

  torch::Tensor operator()(const torch::Tensor& y, const torch::Tensor& v, const torch::Tensor&) const override {
    const auto g = gate();
    switch (exec_->rt.kernels.xsa) {
      case XsaImpl::kFused: return exclude_self_value_fused(y, v, eps_, g);
      case XsaImpl::kFusedWide: return exclude_self_value_fused(y, v, eps_, g, /*wide=*/true);
      case XsaImpl::kComposed: return exclude_self_value_autograd(y, v, eps_, g);
      case XsaImpl::kOps: break;
    }
    return exclude_self_value(y, v, eps_, g);
  }

  bool init(const std::string& name, torch::Tensor& p) const override {
    if (name != "xsa_gate") return false;
    p.fill_(start_ == XsaGate::kXsa ? kXsaGateInitXsa : 0.0);
    return true;
  }

  torch::Tensor head_gates() const override {
    return alpha_.defined() ? torch::tanh(alpha_.detach().to(torch::kCPU, torch::kFloat64)) : torch::Tensor();
  }

  std::string describe() const override {
    return start_ == XsaGate::kOff ? "" : fmt::format(", gated (starts as {})", name(start_));
  }

 private:
  // tanh in float64: at the XSA end tanh(alpha) is 1 in float32, where float32's
  // backward (1 - tanh^2) would be exactly 0 and the gate could never move.
  torch::Tensor gate() const {
    if (!alpha_.defined()) return {};
    return torch::tanh(alpha_.to(torch::kFloat64)).to(torch::kFloat32).view({n_head_, 1, 1});
  }

  ExecPtr exec_;
  double eps_;
  XsaGate start_;
  int64_t n_head_;
  torch::Tensor alpha_;  // (n_head); only with a gate
};

}  // namespace

std::unique_ptr<AttentionStep> make_xsa_step(const StepContext& c) { return std::make_unique<XsaStep>(c); }

int64_t xsa_step_params(const ModelConfig& c) { return gate_start(c) != XsaGate::kOff ? c.n_head : 0; }

}  // namespace xsagpt
