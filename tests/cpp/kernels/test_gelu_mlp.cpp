// The MLP with its GELU in the GEMM epilogues (kernels/gelu_mlp.h) on the CPU, where
// it runs its ATen twin: forward and every gradient against float64 formulas of
// the tanh GELU and its derivative written out here (not autograd, not ATen's
// gelu); the model with the gelu kernel against the model without it; model.gelu
// in the config and the errors that keep the kernel to tanh models. The cuBLASLt
// GEMMs are checked against the twin in test_gelu_mlp_cuda.cpp.
#include "config/kernel_fit.h"
#include "config/run_config.h"
#include "gelu_reference.h"
#include "helpers.h"
#include "kernels/gelu_mlp.h"
#include "live_head.h"
#include "model/gpt.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

using namespace xsagpt;
using ::testing::HasSubstr;

namespace {

const auto kF64 = torch::TensorOptions().dtype(torch::kFloat64);

// Largest error relative to the reference's largest magnitude.
double rel_error(const torch::Tensor& got, const torch::Tensor& want) {
  EXPECT_EQ(got.sizes(), want.sizes());
  return (got.to(torch::kFloat64) - want).abs().max().item<double>() / want.abs().max().item<double>();
}

}  // namespace

class GeluMlpBias : public ::testing::TestWithParam<bool> {};

TEST_P(GeluMlpBias, TwinMatchesTheFloat64TanhFormulaWithEveryGradient) {
  const bool bias = GetParam();
  torch::manual_seed(21);
  const int64_t d = 12, H = 40;
  auto x = torch::randn({3, 7, d}, kF64).requires_grad_(true);
  // Pre-activations of a few units: GELU's curved part, where tanh and erf differ.
  auto w1 = (torch::randn({H, d}, kF64) * (2.0 / std::sqrt(d))).requires_grad_(true);
  auto w2 = (torch::randn({d, H}, kF64) / std::sqrt(H)).requires_grad_(true);
  auto b1 = bias ? (torch::randn({H}, kF64) * 0.5).requires_grad_(true) : torch::Tensor();
  auto b2 = bias ? torch::randn({d}, kF64).requires_grad_(true) : torch::Tensor();
  auto y = gelu_mlp(x, w1, w1, b1, w2, w2, b2);
  auto g = torch::randn(y.sizes(), kF64);
  (y * g).sum().backward();
  const auto ref = test::mlp_formula(x.detach(), w1.detach(), b1.defined() ? b1.detach() : b1, w2.detach(),
                                     b2.defined() ? b2.detach() : b2, g);

  // What is compared is not trivial: every gradient is alive, and at these
  // pre-activations exact GELU is measurably another function.
  for (const auto& t : {ref.dx, ref.dw1, ref.dw2}) ASSERT_GT(t.abs().max().item<double>(), 0.1);
  auto pre = x.detach().reshape({-1, d}).matmul(w1.detach().t());
  ASSERT_GT(pre.abs().max().item<double>(), 2.0);
  ASSERT_GT((torch::gelu(pre) - test::tanh_gelu_f64(pre)).abs().max().item<double>(), 1e-5);

  EXPECT_LT(rel_error(y, ref.y), 1e-12) << "y";
  EXPECT_LT(rel_error(x.grad(), ref.dx), 1e-12) << "dx";
  EXPECT_LT(rel_error(w1.grad(), ref.dw1), 1e-12) << "dW1";
  EXPECT_LT(rel_error(w2.grad(), ref.dw2), 1e-12) << "dW2";
  if (bias) {
    EXPECT_LT(rel_error(b1.grad(), ref.db1), 1e-12) << "db1";
    EXPECT_LT(rel_error(b2.grad(), ref.db2), 1e-12) << "db2";
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, GeluMlpBias, ::testing::Bool());

// The compute copies in bf16, the master weights and biases float32 (the weights
// kernel's arrangement): y and dx in bf16, every parameter's gradient in float32,
// each within bf16's rounding of the float64 formula on the same bf16 operands.
TEST(GeluMlp, Bf16CopiesGiveFloat32GradientsToTheMasterParameters) {
  torch::manual_seed(22);
  const int64_t d = 32, H = 128;
  auto x = torch::randn({4, 9, d}).to(torch::kBFloat16).requires_grad_(true);
  auto w1 = (torch::randn({H, d}) * (2.0 / std::sqrt(d))).requires_grad_(true);
  auto w2 = (torch::randn({d, H}) / std::sqrt(H)).requires_grad_(true);
  auto b1 = (torch::randn({H}) * 0.5).requires_grad_(true), b2 = torch::randn({d}).requires_grad_(true);
  const auto w1c = w1.detach().to(torch::kBFloat16), w2c = w2.detach().to(torch::kBFloat16);
  auto y = gelu_mlp(x, w1, w1c, b1, w2, w2c, b2);
  EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
  auto g = torch::randn(y.sizes()).to(torch::kBFloat16);
  y.backward(g);
  for (const auto& p : {w1, w2, b1, b2}) EXPECT_EQ(p.grad().scalar_type(), torch::kFloat32);
  EXPECT_EQ(x.grad().scalar_type(), torch::kBFloat16);
  // The formula on the operands the function saw: bf16 x, bf16 copies, bf16 biases.
  const auto ref =
      test::mlp_formula(x.detach(), w1c, b1.detach().to(torch::kBFloat16), w2c, b2.detach().to(torch::kBFloat16), g);
  ASSERT_GT(ref.dw1.abs().max().item<double>(), 0.1);
  // bf16 keeps 8 significant bits (relative rounding 2^-9 = 0.002); pre, h and dh are
  // each rounded once on the way, so a few roundings: 2e-2 of the largest element.
  EXPECT_LT(rel_error(y, ref.y), 2e-2) << "y";
  EXPECT_LT(rel_error(x.grad(), ref.dx), 2e-2) << "dx";
  EXPECT_LT(rel_error(w1.grad(), ref.dw1), 2e-2) << "dW1";
  EXPECT_LT(rel_error(w2.grad(), ref.dw2), 2e-2) << "dW2";
  EXPECT_LT(rel_error(b1.grad(), ref.db1), 2e-2) << "db1";
  EXPECT_LT(rel_error(b2.grad(), ref.db2), 2e-2) << "db2";
}

namespace {

// A tanh model small enough for a CPU, its MLP's input weights large enough that
// the pre-activations reach GELU's curved part (at the initialisation they barely do).
GPT gelu_test_model(GeluKind gelu, bool bias) {
  auto cfg = test::small_model("xsa", 64);
  cfg.gelu = gelu;
  cfg.bias = bias;
  torch::manual_seed(23);
  GPT m(cfg);
  test::randomize_head(m);
  torch::NoGradGuard no_grad;
  for (auto& [name, p] : m->unique_named_parameters()) {
    if (name.find("mlp.c_fc.weight") != std::string::npos) p.normal_(0.0, 3.0 / std::sqrt(cfg.d_model));
    if (name.find("bias") != std::string::npos) p.normal_(0.0, 0.1);
  }
  return m;
}

std::pair<double, std::map<std::string, torch::Tensor>> loss_and_grads(GPT& m, const Runtime& rt) {
  m->zero_grad();
  m->set_runtime(rt);
  torch::manual_seed(24);
  auto idx = torch::randint(0, 64, {2, 16}, torch::kLong);
  auto loss = m->forward(idx, idx).loss;
  loss.backward();
  return {loss.item<double>(), test::gradients(m)};
}

}  // namespace

// On a CPU the gelu kernel is its twin: the same linear, tanh GELU, linear as the
// model's ATen path, so the loss and every gradient agree to float32 rounding, and in
// bf16 with the weights kernel's copies to bf16 rounding.
TEST(GeluMlp, ModelWithTheGeluKernelEqualsTheModelWithout) {
  for (bool bias : {false, true}) {
    for (bool bf16 : {false, true}) {
      SCOPED_TRACE(std::string(bias ? "bias" : "no bias") + (bf16 ? ", bf16 weights" : ", fp32"));
      auto m = gelu_test_model(GeluKind::kTanh, bias);
      const std::string base = bf16 ? "weights" : "aten";
      auto [l0, g0] = loss_and_grads(m, test::runtime("none", 0, base, false, bf16));
      test::assert_live(g0);
      auto [l1, g1] = loss_and_grads(m, test::runtime("none", 0, bf16 ? "weights,gelu" : "gelu", false, bf16));
      const double tol = bf16 ? 2e-2 : 1e-5;
      EXPECT_NEAR(l1, l0, tol * std::abs(l0));
      for (const auto& [name, g] : g0) {
        ASSERT_TRUE(g1.at(name).defined()) << name;
        const double rel = (g1.at(name) - g).norm().item<double>() / g.norm().item<double>();
        EXPECT_LT(rel, tol) << name;
      }
    }
  }
}

// model.gelu changes the function (tanh against erf), and the recompute path of the
// MLP runs the kernel too.
TEST(GeluMlp, TanhModelDiffersFromExactAndRecomputesWithTheKernel) {
  auto tanh_model = gelu_test_model(GeluKind::kTanh, false);
  auto exact_model = gelu_test_model(GeluKind::kExact, false);  // the same weights (same seed)
  auto [lt, gt] = loss_and_grads(tanh_model, test::runtime());
  auto [le, ge] = loss_and_grads(exact_model, test::runtime());
  EXPECT_GT(std::abs(lt - le), 1e-6);
  EXPECT_LT(std::abs(lt - le), 1e-2);
  auto [lr, gr] = loss_and_grads(tanh_model, test::runtime("mlp", 0, "gelu"));
  EXPECT_NEAR(lr, lt, 1e-5 * lt);
  for (const auto& [name, g] : gt) EXPECT_LT((gr.at(name) - g).norm().item<double>() / g.norm().item<double>(), 1e-5);
}

TEST(GeluConfig, ModelGeluIsReadWrittenAndDefaultsToExact) {
  const auto old = model_config_from_json(json{{"d_model", 64}});  // a config from before the key
  EXPECT_EQ(old.gelu, GeluKind::kExact);
  EXPECT_EQ(to_json(old).at("gelu"), "exact");
  EXPECT_EQ(model_config_from_json(json{{"gelu", "tanh"}}).gelu, GeluKind::kTanh);
  const auto err = test::error_of<ConfigError>([] { model_config_from_json(json{{"gelu", "erf"}}); });
  EXPECT_THAT(err, HasSubstr("model.gelu"));
  EXPECT_THAT(err, HasSubstr("\"exact\" or \"tanh\""));
}

TEST(GeluConfig, TheKernelIsARowOutsideFusedAndAuto) {
  const auto names = kernel_names();
  EXPECT_EQ(names.back(), "gelu");
  EXPECT_TRUE(parse_kernels("gelu", true).gelu);
  EXPECT_EQ(describe(parse_kernels("fused,gelu", false)), describe(parse_kernels("fused", false)) + ",gelu");
  EXPECT_FALSE(parse_kernels("fused", true).gelu);
  EXPECT_FALSE(parse_kernels("auto", true).gelu);
  EXPECT_THAT(kernels_help(), HasSubstr("all but fp8, fp8_all and gelu"));
}

TEST(GeluConfig, TheKernelIsRefusedOnAnExactModelAndBesideFp8) {
  ModelConfig exact, tanh_model;
  tanh_model.gelu = GeluKind::kTanh;
  EXPECT_NO_THROW(check_kernels_fit_model(parse_kernels("fused,gelu", true), tanh_model));
  EXPECT_NO_THROW(check_kernels_fit_model(parse_kernels("fused,fp8", true), exact));
  auto err = test::error_of<ConfigError>([&] { check_kernels_fit_model(parse_kernels("gelu", true), exact); });
  EXPECT_THAT(err, HasSubstr("train.kernels"));
  EXPECT_THAT(err, HasSubstr("model.gelu=\"tanh\""));
  EXPECT_THAT(err, HasSubstr("model.gelu is \"exact\""));
  err = test::error_of<ConfigError>([&] { check_kernels_fit_model(parse_kernels("fp8,gelu", true), tanh_model); });
  EXPECT_THAT(err, HasSubstr("train.kernels"));
  EXPECT_THAT(err, HasSubstr("gelu and fp8"));

  // Where a model takes its runtime (bench, eval, the tests), not only in train's validation.
  auto cfg = test::small_model("sa");
  GPT m(cfg);
  err = test::error_of<ConfigError>([&] { m->set_runtime(test::runtime("none", 0, "gelu")); });
  EXPECT_THAT(err, HasSubstr("model.gelu"));
  EXPECT_FALSE(m->runtime().kernels.gelu);  // refused: the model keeps its runtime
}

TEST(GeluConfig, RunConfigValidationNamesBothKeys) {
  RunConfig c;
  c.model = test::small_model("sa");
  c.data.train = "a/*.bin";
  c.data.val = "b/*.bin";
  c.train.seq_len = 16;
  c.train.micro_batch = 2;
  c.train.kernels = "fused,gelu";
  const auto err = test::error_of<ConfigError>([&] { c.validate(1); });
  EXPECT_THAT(err, HasSubstr("train.kernels"));
  EXPECT_THAT(err, HasSubstr("model.gelu"));
  c.model.gelu = GeluKind::kTanh;
  EXPECT_NO_THROW(c.validate(1));
}
