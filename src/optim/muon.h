// Muon (Jordan et al., 2024) for the 2-D matrices inside the transformer blocks,
// as torch.optim.Muon defines it, so that one is the reference it is tested
// against (tests/python/train/test_muon.py):
//   buf <- lerp(buf, g, 1 - mu);  u <- lerp(g, buf, mu)    (Nesterov momentum)
//   O   <- NewtonSchulz_k(u / ||u||_F)                     (quintic, a, b, c below)
//   W   <- W (1 - lr wd) - adjust(lr, A x B) O
// Two choices of our own:
//  - The fused q/k/v projection (3*inner x d_model) is three matrices to Muon:
//    each of q, k and v is orthogonalised, and its rate adjusted, on its own,
//    exactly as a model with separate projections would be. Orthogonalising the
//    stack would tie the three updates' spectra to each other for no reason
//    other than how the weights happen to be stored.
//  - The Newton-Schulz iterations run batched: every matrix of one shape (after
//    turning tall ones on their side) is stacked into one (N, rows, cols) tensor,
//    and each iteration is three batched matmuls over all of them, so the 24-32
//    layers of a paper model cost a few large matmuls rather than hundreds of
//    small ones. On CUDA in bf16 (cuBLAS accumulates bf16 products in float32),
//    elsewhere in float32, or in float64 for a float64 model (the tests).
#pragma once

#include "config/optim_choices.h"

#include <torch/torch.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace xsagpt {

// Its defaults are the train.muon_* keys' (train/parts.h: muon_config), so none here.
struct MuonConfig {
  double momentum;
  int64_t ns_steps;
  double weight_decay;
  MuonAdjustLr adjust_lr;
};

// torch.optim.Muon's quintic coefficients (Keller Jordan's): a steep slope at zero
// so that 5 iterations lift even small singular values, at the price of leaving
// them spread around 1 (roughly 0.5 to 1.5) rather than at 1, which training
// does not mind.
inline constexpr double kNsA = 3.4445, kNsB = -4.7750, kNsC = 2.0315;
inline constexpr double kNsEps = 1e-7;  // floor of ||u||_F, as torch's

// Whether Muon updates parameter `name`: a matrix inside a transformer block. The
// embedding, the head and the sinks are matrices too, but outside the blocks. A
// parameter of an attention kind's step goes to AdamW unless the kind's row lets Muon
// take it (model/attention_kinds.h: StepParameter), so a new kind's matrix is never
// orthogonalised without its row deciding it. The shipped kinds' gates (the gated
// kind's projection, the per-token XSA gate's) go to AdamW, as modded-nanogpt moved
// its gates from Muon to Adam: each row reads one scalar gate per head or channel
// through a sigmoid or tanh, and orthogonalising would force every row to the same
// norm, the gates' scale being what they learn.
bool muon_updates(const std::string& name, const torch::Tensor& p);
// How many matrices Muon sees in it, stacked along dim 0 (3 for the fused q/k/v).
int64_t muon_blocks(const std::string& name);
// Muon's rate for one A x B matrix at rate lr (torch.optim.Muon's _adjust_lr).
double muon_adjusted_lr(double lr, MuonAdjustLr adjust, int64_t rows, int64_t cols);

// Newton-Schulz orthogonalisation of each matrix of a (N, rows, cols) batch with
// rows <= cols, in the batch's dtype: normalised by its Frobenius norm, then
// `steps` quintic iterations X <- a X + (b A + c A^2) X, A = X X^T.
torch::Tensor newton_schulz(const torch::Tensor& batch, int64_t steps);

class Muon {
 public:
  Muon(std::vector<std::pair<std::string, torch::Tensor>> named_params, MuonConfig cfg);
  // One update at rate lr of every parameter with a gradient.
  void step(double lr);
  // Momentum buffers by parameter name; what a checkpoint stores.
  std::map<std::string, torch::Tensor> state() const;
  void load_state(const std::map<std::string, torch::Tensor>& momentum);  // throws naming the parameter
  const std::vector<std::pair<std::string, torch::Tensor>>& params() const { return params_; }
  // The dtype the Newton-Schulz iterations run in on this device.
  torch::ScalarType ns_dtype() const;

 private:
  std::vector<std::pair<std::string, torch::Tensor>> params_;
  std::vector<torch::Tensor> momentum_;  // aligned with params_
  MuonConfig cfg_;
};

}  // namespace xsagpt
