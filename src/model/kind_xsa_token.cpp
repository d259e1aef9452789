// The "xsa_token" kind: XSA's step scaled by a gate read from the token, as
// modded-nanogpt's record of 2026-05-27 (MUDD gates) drives its XSA layers: where the
// "xsa" kind's model.xsa_gate learns one g per head, here each token t computes its
// own per head from the layer's input x_t (after ln_1),
//
//     z_{t,h} = y_{t,h} - g_{t,h} (y_{t,h} . v^_{t,h}) v^_{t,h},    g_{t,h} = tanh(x_t . w_h + b_h)
//
// (model/xsa.h: g = 0 is SA, g = 1 is XSA). The record computes its coefficients with a
// small two-layer network shared by several layers and a learned global scale; this is
// that gate's simplest per-layer form: one linear map per layer, W (n_head x d_model)
// and b (n_head). Both start at zero, as the record's XSA coefficients do, so a fresh
// model is exactly SA and the gradient of W at the start, (dL/dg) x_t, is not zero.
//
// model.xsa_layers selects the layers as for "xsa". The XSA kernels take one gate per
// head, not per token, so the step is the custom autograd function on ATen ops
// (exclude_self_value with a (B, H, T, 1) gate) under any train.kernels. The matrix is
// "xsa_token_gate" on the layer, which its row leaves to AdamW under Muon (optim/muon.h).
//
// Its work per token in a layer: the linear layer x W^T + b, 6 (d_model + 1) n_head
// FLOPs forward and backward as every linear layer is counted, its bias included (XSA's
// dot products are not products of the convention), and for backward the gate g in
// float32 (n_head numbers, kept once by tanh and by the XSA step); y and v attention keeps.
#include "model/attention_kinds.h"
#include "model/xsa.h"

namespace xsagpt {

namespace {

class TokenGateStep : public AttentionStep {
 public:
  explicit TokenGateStep(const StepContext& c) : exec_(c.exec), eps_(c.cfg.xsa_eps) {
    w_ = c.module.register_parameter("xsa_token_gate", torch::zeros({c.cfg.n_head, c.cfg.d_model}));
    b_ = c.module.register_parameter("xsa_token_gate_bias", torch::zeros({c.cfg.n_head}));
  }

  torch::Tensor operator()(const torch::Tensor& y, const torch::Tensor& v, const torch::Tensor& x) const override {
    // float64 (tests, analyze) takes the weights in float64; otherwise as the block's other products.
    auto a = x.scalar_type() == torch::kFloat64
                 ? torch::addmm(b_.to(torch::kFloat64), x.flatten(0, 1), w_.to(torch::kFloat64).t())
                       .view({x.size(0), x.size(1), -1})
                 : exec_->linear(x, w_, b_);
    const auto ct = torch::promote_types(y.scalar_type(), torch::kFloat32);
    auto g = torch::tanh(a.to(ct)).transpose(1, 2).unsqueeze(-1);  // (B, H, T, 1)
    return exclude_self_value(y, v, eps_, g);
  }

  bool init(const std::string& name, torch::Tensor& p) const override {
    if (name != "xsa_token_gate" && name != "xsa_token_gate_bias") return false;
    p.zero_();  // g = 0: the model starts as SA
    return true;
  }

  std::string describe() const override { return ", gated per token"; }

 private:
  ExecPtr exec_;
  double eps_;
  torch::Tensor w_, b_;  // (n_head, d_model), (n_head)
};

}  // namespace

std::unique_ptr<AttentionStep> make_xsa_token_step(const StepContext& c) { return std::make_unique<TokenGateStep>(c); }

int64_t xsa_token_step_params(const ModelConfig& c) { return c.n_head * (c.d_model + 1); }

double xsa_token_step_flops(const ModelConfig& c, int64_t) {
  return 6.0 * static_cast<double>(c.n_head * (c.d_model + 1));
}

double xsa_token_step_activations(const ModelConfig& c, double) { return 4.0 * static_cast<double>(c.n_head); }

}  // namespace xsagpt
