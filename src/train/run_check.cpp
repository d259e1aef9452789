#include "train/run_check.h"

#include "config/kernel_fit.h"
#include "kernels/fp8_linear.h"

namespace xsagpt {

void check_runnable(const RunConfig& cfg, const Runtime& rt, const std::optional<torch::Device>& device,
                    const std::string& key) {
  check_kernels_fit_model(rt.kernels, cfg.model, key);
  if (rt.kernels.fp8) {  // a GPU without FP8 GEMMs, or shapes cuBLASLt's cannot take, would fail in the first step
    const auto& m = cfg.model;
    const std::vector<int64_t> dims{m.d_model, 3 * m.inner_dim(), m.inner_dim(), m.mlp_dim()};
    if (auto why = device ? fp8_refusal(*device, dims, key) : fp8_shape_refusal(dims, key); !why.empty())
      throw ConfigError(why);
  }
}

}  // namespace xsagpt
