// μP's rules per parameter (model.parametrization "mup"; config/model_config.h says what
// the parametrization is and cites it). Which parameters are hidden matrices decides
// everything else: they alone start smaller and train at a smaller AdamW rate as the
// width multiplier m grows. The blocks' four projections are; an attention kind's
// parameters are what its row says (model/attention_kinds.h: WidthRole); everything
// outside the blocks (embedding, sinks, the LM head, whose input the model scales by
// 1/m instead), the norms and the biases are vector-like and keep SP's start and rate.
#pragma once

#include "config/model_config.h"
#include "model/attention_kinds.h"

#include <torch/torch.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace xsagpt {

// What parameter `name` (as GPT names it) is to μP; kUnsaid only for an attention
// kind's parameter its row leaves unsaid.
WidthRole width_role(const ModelConfig& cfg, const std::string& name, const torch::Tensor& p);

// Each hidden matrix's factor on its initial std, 1/sqrt(m), by name; empty under "sp".
// ConfigError naming the kind and the parameter for one whose role its row leaves unsaid.
std::map<std::string, double> mup_init_scales(const ModelConfig& cfg,
                                              const std::vector<std::pair<std::string, torch::Tensor>>& params);

// Each hidden matrix's factor on AdamW's rate, 1/m, by name (AdamWConfig::rate_scales);
// empty under "sp" and at m = 1, where every factor would be 1.
std::map<std::string, double> mup_rate_scales(const ModelConfig& cfg,
                                              const std::vector<std::pair<std::string, torch::Tensor>>& params);

// One line for the log and `xsagpt info`: "mup, m = 4 (d_model 1024 over base 256): ...";
// "sp" under sp.
std::string describe_parametrization(const ModelConfig& cfg);

}  // namespace xsagpt
