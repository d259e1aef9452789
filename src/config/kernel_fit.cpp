#include "config/kernel_fit.h"

#include <fmt/format.h>

namespace xsagpt {

void check_kernels_fit_model(const Kernels& k, const ModelConfig& m, const std::string& key) {
  if (!k.gelu) return;
  if (m.gelu != GeluKind::kTanh)
    throw ConfigError(fmt::format(
        "{}: the gelu kernel computes the tanh approximation of GELU (cuBLASLt's GEMM epilogue), so it needs "
        "model.gelu=\"{}\", but model.gelu is \"{}\"; leave gelu out of {}, or train a model with model.gelu=\"{}\"",
        key, name(GeluKind::kTanh), name(m.gelu), key, name(GeluKind::kTanh)));
  // Both replace the MLP's GEMMs: the FP8 GEMMs cannot carry cuBLASLt's bf16 GELU
  // epilogue here, and taking one silently over the other would hide which ran.
  if (k.fp8)
    throw ConfigError(key +
                      ": gelu and fp8 both replace the MLP's GEMMs (bf16 GEMMs with the GELU in their epilogues, "
                      "or FP8 GEMMs); choose one");
}

}  // namespace xsagpt
