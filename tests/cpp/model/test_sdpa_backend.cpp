// The SDPA backend probe the trainer logs (model/sdpa_backend.h). On a GPU, the
// paper's head sizes in bf16 must get a fused kernel (flash or cuDNN), never the
// math path; on a CPU the probe answers without failing.
#include "helpers.h"
#include "model/sdpa_backend.h"

#include <gtest/gtest.h>
#include <torch/cuda.h>

using namespace xsagpt;

TEST(SdpaBackend, CpuProbeNamesABackend) {
  const auto name = sdpa_backend(test::small_model("xsa"), torch::kCPU, /*bf16=*/false, 0.0);
  EXPECT_TRUE(name == "flash_attention" || name == "math") << name;
}

TEST(SdpaBackend, PaperHeadSizesGetAFusedKernelOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (int64_t head_dim : {64, 128, 256}) {
    auto cfg = test::small_model("xsa");
    cfg.block_size = 2048;
    cfg.n_head = 4;
    cfg.head_dim = head_dim;
    const auto name = sdpa_backend(cfg, torch::kCUDA, /*bf16=*/true, 0.0);
    std::printf("head_dim %ld: %s\n", head_dim, name.c_str());
    EXPECT_TRUE(name == "flash_attention" || name == "cudnn_attention") << "head_dim " << head_dim << ": " << name;
  }
}
