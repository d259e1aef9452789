// The FLOPs an attention kind's step adds (model/counts.h: flops_per_token, which MFU
// divides by) against a count by hand from each kind's formula, in float64, written
// here without the rows' hooks: the gated kind's gate x W^T with W (n_head or
// n_head*head_dim) x d_model, and the per-token XSA gate's x W^T + b with W n_head x
// d_model, each product 2 FLOPs per weight per token forward and 4 backward, a linear
// layer's bias counted as a weight (PaLM's convention, as the blocks' products and
// biases are counted). XSA's own step has no product. tests/python/kind_flops.py holds
// the same formulas for the Python checklist (its STEP_MATMUL).
#include "helpers.h"
#include "model/counts.h"

#include <gtest/gtest.h>

using namespace xsagpt;

namespace {

// The paper's 1.4B shape: 24 layers of 16 heads of 128 on 2048, inner width 2048.
ModelConfig paper_model(const std::string& kind, const json& keys = json::object()) {
  ModelConfig c;
  c.vocab_size = 50304, c.block_size = 2048, c.n_layer = 24, c.d_model = 2048, c.n_head = 16, c.head_dim = 128;
  c.set_attention(kind, keys);
  return c;
}

// FLOPs per token beyond standard attention's, at sequence length T.
double extra_flops(const ModelConfig& c, int64_t T) {
  return flops_per_token(c, T) - flops_per_token(paper_model("sa"), T);
}

}  // namespace

TEST(KindCounts, FlopsOfEachKindsProductsAreItsFormulas) {
  const double L = 24, d = 2048, H = 16, inner = 16 * 128;
  for (const int64_t T : {1024, 2048}) {
    SCOPED_TRACE(T);
    // Standard attention itself: 6 per matmul weight plus the attention term 12 L inner T.
    const double matmul = L * (4 * d * inner + 2 * d * 4 * d) + 50304 * d;
    ASSERT_DOUBLE_EQ(flops_per_token(paper_model("sa"), T), 6 * matmul + 12 * L * inner * static_cast<double>(T));
    EXPECT_DOUBLE_EQ(extra_flops(paper_model("xsa"), T), 0.0);  // per-head dot products: no product counted
    EXPECT_DOUBLE_EQ(extra_flops(paper_model("xsa", {{"xsa_gate", "sa"}}), T), 0.0);
    EXPECT_DOUBLE_EQ(extra_flops(paper_model("gated"), T), L * 6 * H * d);  // headwise, the default
    EXPECT_DOUBLE_EQ(extra_flops(paper_model("gated", {{"out_gate", "headwise"}}), T), L * 6 * H * d);
    EXPECT_DOUBLE_EQ(extra_flops(paper_model("gated", {{"out_gate", "elementwise"}}), T), L * 6 * inner * d);
    EXPECT_DOUBLE_EQ(extra_flops(paper_model("xsa_token"), T), L * 6 * H * (d + 1));
    // Only the layers that take the step count it.
    EXPECT_DOUBLE_EQ(extra_flops(paper_model("xsa_token", {{"xsa_layers", "last 6"}}), T), 6 * 6 * H * (d + 1));
  }
  // The elementwise gate is a twelfth of a block's products at this shape (inner = d, MLP 4d).
  const double block = 6 * (4 * d * inner + 8 * d * d);
  EXPECT_NEAR(L * 6 * inner * d / (L * block), 1.0 / 12, 1e-12);
}
