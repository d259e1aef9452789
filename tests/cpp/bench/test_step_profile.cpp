// `bench --profile`'s arithmetic: kernel and op names land in the categories the
// help promises (names as CUPTI and the CPU profiler spell them), and each event's
// self time is its duration less the events nested in it on its lane, so nothing
// is counted twice and the categories add up to the total.
#include "bench/step_profile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

using namespace xsagpt;

TEST(StepProfile, CategorisesKernelAndOpNames) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      // cuBLAS on Hopper, older cuBLAS/CUTLASS, split-K reduction, and the ATen ops and backward nodes over them.
      {"nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_NTT", "gemm"},
      {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
       "__5x_cublas",
       "gemm"},
      {"ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", "gemm"},
      {"void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>(...)", "gemm"},
      {"void splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, true, false, false>(...)",
       "gemm"},
      {"aten::mm", "gemm"},
      {"aten::addmm", "gemm"},
      {"aten::linear", "gemm"},
      {"AddmmBackward0", "gemm"},
      {"autograd::engine::evaluate_function: MmBackward0", "gemm"},
      // FP8 GEMMs: cuBLASLt's e4m3 kernels, at::_scaled_mm on a CPU, the FP8 layer's autograd node.
      {"sm90_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize128x128x128_warpgroupsize1x1x1_execute_segment_k_off_kernel"
       "__5x_cublas",
       "gemm"},
      {"aten::_scaled_mm", "gemm"},
      {"torch::autograd::CppNode<xsagpt::(anonymous namespace)::Fp8Linear>", "gemm"},
      // What makes FP8's operands: xsagpt's scale-and-cast, ATen's copy kernel instantiated for
      // an FP8 type (the transposed e4m3/e5m2 copies, the ATen twin's cast), and the amax.
      {"void xsagpt::(anonymous namespace)::fp8_scale_cast_kernel<c10::BFloat16, __nv_fp8_e4m3, 8>(c10::BFloat16 "
       "const*, float const*, float, __nv_fp8_e4m3*, long)",
       "quantize"},
      {"void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_"
       "cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#14}::operator()() const::{lambda(c10"
       "::Float8_e4m3fn)#1}>(at::TensorIteratorBase&, ...)::{lambda(int)#1}>(int, ...)",
       "quantize"},
      {"void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{"
       "lambda()#3}::operator()() const::{lambda()#15}::operator()() const::{lambda(c10::Float8_e5m2)#1}, ...>(...)",
       "quantize"},
      {"void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, at::native::AbsMaxOps<c10::BFloat16"
       ", float, float>, unsigned int, float, 4, 4> >(...)",
       "quantize"},
      // SDPA's flash, memory-efficient (CUTLASS-built, yet attention), cuDNN and CPU paths; XSA's kernels and function.
      {"void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t"
       ", Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, false, true, false, "
       "false>(FLASH_NAMESPACE::Flash_fwd_params)",
       "attention"},
      {"fmha_cutlassB_bf16_aligned_64x64_k128_sm80(PyTorchMemEffAttention::AttentionBackwardKernel<...>::Params)",
       "attention"},
      {"cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x128_4x1x1_kernel0_0", "attention"},
      {"aten::_scaled_dot_product_flash_attention_for_cpu", "attention"},
      {"ScaledDotProductFlashAttentionForCpuBackward0", "attention"},
      {"void xsagpt::(anonymous namespace)::xsa_forward_kernel<c10::BFloat16, float, 8, 4>(c10::BFloat16 const*, ...)",
       "attention"},
      {"void xsagpt::(anonymous namespace)::xsa_backward_kernel<float, float, 4, 8>(float const*, ...)", "attention"},
      {"torch::autograd::CppNode<xsagpt::(anonymous namespace)::ExcludeSelfValue>", "attention"},
      // Layer norm: ATen's, and the fused residual add + norm.
      {"void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float, float const*, "
       "float const*, float const*, float*, float*, float*)",
       "norm"},
      {"void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernelTemplate<float, float, 32u, 32u, 256u, "
       "false, true, true>(...)",
       "norm"},
      {"void xsagpt::(anonymous namespace)::add_norm_backward_kernel<c10::BFloat16, 4, 2>(c10::BFloat16 const*, ...)",
       "norm"},
      {"aten::native_layer_norm", "norm"},
      {"NativeLayerNormBackward0", "norm"},
      // The optimizer: fused AdamW, foreach ops, and the clip's norms (not layer norms).
      {"void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
       "FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, "
       "(at::native::ADAM_MODE)1, false>, ...>(...)",
       "optimizer"},
      {"aten::_fused_adamw_", "optimizer"},
      {"aten::_foreach_norm", "optimizer"},
      {"aten::_foreach_mul_", "optimizer"},
      {"void at::native::lpnorm_cleanup<float, (at::native::NormType)1, float, float>(float const*, ...)",
       "optimizer"},
      {"void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::NormTwoOps<float, float, float>"
       ", unsigned int, float, 4, 4> >(...)",
       "optimizer"},
      {"aten::linalg_vector_norm", "optimizer"},
      // Copies and casts: the bf16 weight cache's multi-tensor copy (a foreach op, yet a copy), casts, memcpy, fills.
      {"void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
       "TensorListMetadata<2>, at::native::(anonymous namespace)::CopyFunctor<c10::BFloat16, float, 2, 1, 1>, ...>",
       "copies"},
      {"aten::_foreach_copy_", "copies"},
      {"void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::direct_copy_kernel_cuda(at"
       "::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#12}::operator()() const::{lambda(float)#1}"
       ", std::array<char*, 2ul> >(int, ...)",
       "copies"},
      {"Memcpy DtoD (Device -> Device)", "copies"},
      {"Memset (Device)", "copies"},
      {"aten::to", "copies"},
      {"aten::_to_copy", "copies"},
      {"aten::copy_", "copies"},
      {"ToCopyBackward0", "copies"},
      {"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(...)",
       "copies"},
      // Elementwise: pointwise ops, row reductions, RoPE, GELU, the loss's rows.
      {"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*"
       ", 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)",
       "elementwise"},
      {"void xsagpt::(anonymous namespace)::rope_qkv_kernel<c10::BFloat16, 8>(c10::BFloat16 const*, ...)",
       "elementwise"},
      {"void xsagpt::(anonymous namespace)::cross_entropy_rows_kernel<c10::BFloat16>(c10::BFloat16*, ...)",
       "elementwise"},
      {"aten::gelu", "elementwise"},
      {"GeluBackward0", "elementwise"},
      {"aten::mul", "elementwise"},
      {"autograd::engine::evaluate_function: MulBackward0", "elementwise"},
      {"aten::sum", "elementwise"},
      {"aten::amax", "elementwise"},  // the loss's row maxima too: not FP8's amax, an infinity norm on CUDA
      {"aten::_log_softmax", "elementwise"},
      {"autograd::engine::evaluate_function: NllLossBackward0", "elementwise"},
      {"torch::autograd::AccumulateGrad", "elementwise"},
      // What none of the rules claims.
      {"aten::view", "other"},
      {"aten::empty", "other"},
      {"aten::embedding_dense_backward", "other"},
      {"TBackward0", "other"},
  };
  for (const auto& [name, category] : cases) EXPECT_EQ(profile_category(name), category) << name;
  for (const auto& [name, category] : cases)
    EXPECT_NE(std::find_if(kProfileCategories.begin(), kProfileCategories.end(),
                           [&](const char* c) { return category == c; }),
              kProfileCategories.end())
        << category;
}

TEST(StepProfile, SelfTimeCountsNestedEventsOnce) {
  // Lane 1: linear [0, 100] calls addmm [10, 30]; layer_norm [40, 60] calls native_layer_norm [42, 58];
  // a second addmm [70, 75]. Lane 2 (another thread) runs an addmm [5, 25] at the same time: counted too.
  // A last op on lane 1 starts after linear ends: not its child.
  const std::vector<ProfiledEvent> events = {
      {"aten::addmm", 1, 10'000, 30'000},       {"aten::linear", 1, 0, 100'000},
      {"aten::layer_norm", 1, 40'000, 60'000},  {"aten::native_layer_norm", 1, 42'000, 58'000},
      {"aten::addmm", 1, 70'000, 75'000},       {"aten::addmm", 2, 5'000, 25'000},
      {"aten::view", 1, 100'000, 103'000},
  };
  const auto p = summarize_profile(events, /*steps=*/2);
  // Self times (ns): linear 100 - 20 - 20 - 5 = 55 (thousand), layer_norm 20 - 16 = 4, native 16,
  // addmm 20 + 5 + 20 = 45, view 3; per step, in ms: half of each.
  auto ms = [](double kilo_ns) { return kilo_ns * 1e3 / 1e6 / 2; };
  EXPECT_EQ(p.steps, 2);
  EXPECT_DOUBLE_EQ(p.total_ms, ms(55 + 4 + 16 + 45 + 3));
  EXPECT_DOUBLE_EQ(p.categories.at("gemm"), ms(55 + 45));
  EXPECT_DOUBLE_EQ(p.categories.at("norm"), ms(4 + 16));
  EXPECT_DOUBLE_EQ(p.categories.at("other"), ms(3));
  EXPECT_EQ(p.categories.size(), kProfileCategories.size());
  EXPECT_DOUBLE_EQ(p.categories.at("attention"), 0.0);
  const double sum = std::accumulate(p.categories.begin(), p.categories.end(), 0.0,
                                     [](double s, const auto& kv) { return s + kv.second; });
  EXPECT_NEAR(sum, p.total_ms, 1e-12);
  ASSERT_EQ(p.kernels.size(), 5u);  // by name, most time first
  EXPECT_EQ(p.kernels[0].name, "aten::linear");
  EXPECT_DOUBLE_EQ(p.kernels[0].ms, ms(55));
  EXPECT_EQ(p.kernels[1].name, "aten::addmm");
  EXPECT_DOUBLE_EQ(p.kernels[1].ms, ms(45));
  EXPECT_DOUBLE_EQ(p.kernels[1].calls, 1.5);  // three calls over two steps
  EXPECT_EQ(p.kernels[1].category, "gemm");
}

TEST(StepProfile, ProfilesATinyCpuStep) {
  // The profiler itself on a real step: the ops it records are the step's (GEMMs
  // and the fused AdamW among them), and their self times add up to the total.
  ModelConfig model;
  model.vocab_size = 64;
  model.block_size = 16;
  model.n_layer = 1;
  model.d_model = 32;
  model.n_head = 2;
  model.head_dim = 16;
  BenchOptions o;
  o.variants = {"xsa"};
  o.warmup = 1;
  o.runtime = runtime_of(o.train, /*cuda=*/false);
  const auto profiles = profile_train_step(o, model, 2, 16, /*steps=*/2);
  const auto& p = profiles.at("xsa");
  EXPECT_EQ(p.steps, 2);
  EXPECT_GT(p.total_ms, 0);
  EXPECT_GT(p.wall_ms, 0);
  EXPECT_GT(p.categories.at("gemm"), 0);
  EXPECT_GT(p.categories.at("optimizer"), 0);
  EXPECT_GT(p.categories.at("elementwise"), 0);
  double by_kernel = 0;
  for (const auto& k : p.kernels) by_kernel += k.ms;
  EXPECT_NEAR(by_kernel, p.total_ms, 1e-9 * p.total_ms);
  auto has = [&](const std::string& name) {
    return std::any_of(p.kernels.begin(), p.kernels.end(), [&](const KernelTime& k) { return k.name == name; });
  };
  EXPECT_TRUE(has("aten::mm") || has("aten::addmm"));
  EXPECT_TRUE(has("aten::_fused_adamw_"));
}
