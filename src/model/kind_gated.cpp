// The "gated" kind: output-gated attention (Qiu et al. 2025, "Gated Attention for
// Large Language Models", arXiv 2505.06708), at the position the paper found best:
// after SDPA, before the output projection. A sigmoid gate read from the layer's input
// x (after ln_1) scales each head's output, one gate per head ("headwise", the paper's
// head-specific gate) or one per channel ("elementwise"), model.out_gate:
//
//     z_{t,h} = y_{t,h} * sigmoid(x_t . w_h)             (headwise: W is n_head x d_model)
//     z_{t,h,d} = y_{t,h,d} * sigmoid(x_t . w_{h,d})     (elementwise: W is inner x d_model)
//
// The paper makes the gate by widening the query projection, so W starts as the
// projections do, N(0, 0.02) with no bias, and the gates start near sigmoid(0) = 1/2,
// not at the identity. We start it there too: the comparison is then the paper's
// variant, and a near-identity start (a large positive bias) would put the sigmoid on
// its flat tail, where its gradient is small and the gate learns slowly, as
// model.xsa_gate's XSA start does. The factor 1/2 on every head at step 0 is one the
// output projection and the residual stream absorb within the first steps.
//
// The gate's matrix is "out_gate" on the layer; its row leaves it to AdamW under Muon
// (optim/muon.h). No fused kernel: the product runs as ATen ops under any train.kernels.
//
// Its work per token in a layer: the product x W^T, 2 d_model width FLOPs forward and
// twice that backward (6 d_model width, as every product is counted), and for
// backward the gate sigmoid(s) in float32 (width numbers), plus under bf16 the float32
// copy of y that the product y * g keeps (inner numbers); y itself attention keeps.
#include "model/attention_kinds.h"

namespace xsagpt {

namespace {

constexpr const char* kOutGateKey = "out_gate";

int64_t gated_width(const ModelConfig& c) {
  return c.spec().option<OutGate>(kOutGateKey) == OutGate::kElementwise ? c.inner_dim() : c.n_head;
}

class GatedStep : public AttentionStep {
 public:
  explicit GatedStep(const StepContext& c) : exec_(c.exec), n_head_(c.cfg.n_head), width_(gated_width(c.cfg)) {
    w_ = c.module.register_parameter(kOutGateKey, torch::empty({width_, c.cfg.d_model}));
  }

  torch::Tensor operator()(const torch::Tensor& y, const torch::Tensor&, const torch::Tensor& x) const override {
    const auto B = y.size(0), T = y.size(2);
    // float64 (tests, analyze) takes the weight in float64; otherwise as the block's other products.
    auto s = x.scalar_type() == torch::kFloat64 ? torch::matmul(x, w_.to(torch::kFloat64).t()) : exec_->linear(x, w_);
    const auto ct = torch::promote_types(y.scalar_type(), torch::kFloat32);
    auto g = torch::sigmoid(s.to(ct)).view({B, T, n_head_, width_ / n_head_}).transpose(1, 2);  // (B, H, T, 1 or D)
    return (y.to(ct) * g).to(y.scalar_type());
  }

  bool init(const std::string& name, torch::Tensor& p) const override {
    if (name != kOutGateKey) return false;
    p.normal_(0.0, 0.02);  // as the query projection the paper widens
    return true;
  }

  std::string describe() const override { return width_ == n_head_ ? ", headwise gate" : ", elementwise gate"; }

 private:
  ExecPtr exec_;
  int64_t n_head_, width_;
  torch::Tensor w_;  // (n_head or inner, d_model)
};

}  // namespace

std::unique_ptr<AttentionStep> make_gated_step(const StepContext& c) { return std::make_unique<GatedStep>(c); }

int64_t gated_step_params(const ModelConfig& c) { return gated_width(c) * c.d_model; }

double gated_step_flops(const ModelConfig& c, int64_t) { return 6.0 * static_cast<double>(gated_width(c) * c.d_model); }

double gated_step_activations(const ModelConfig& c, double a) {
  return 4.0 * static_cast<double>(gated_width(c)) + (a < 4 ? 4.0 * static_cast<double>(c.inner_dim()) : 0.0);
}

}  // namespace xsagpt
