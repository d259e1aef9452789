// Whether a set of kernels can run a given model. Most kernels compute the model's
// own function in another order of rounding and fit every model; the gelu kernel
// computes the tanh GELU that cuBLASLt's epilogues have, so it runs only a model
// whose model.gelu is "tanh" (config/model_config.h: GeluKind): on an exact-GELU
// model it would silently train another function. Checked where a run config is
// validated (config/run_config.h) and again where a model takes its runtime
// (GPTImpl::set_runtime), so bench, eval and the tests are held to it too.
#pragma once

#include "config/model_config.h"
#include "config/runtime.h"

#include <string>

namespace xsagpt {

// Throws ConfigError naming `key` and model.gelu when `k` cannot run `m`.
void check_kernels_fit_model(const Kernels& k, const ModelConfig& m, const std::string& key = "train.kernels");

}  // namespace xsagpt
