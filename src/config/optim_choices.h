// The optimizer's fixed choices in a run config (train.optimizer, train.adamw,
// train.muon_adjust_lr) as enums, each with the one table of its JSON names
// (config/schema.h's rule): configs, config.json, checkpoints and --set keep the
// names, the program compares the enum. The rule of which optimizers shard lives
// here too, so train's validation and `xsagpt info` ask the same question.
#pragma once

#include "config/schema.h"

#include <array>
#include <utility>

namespace xsagpt {

// train.optimizer: AdamW for every parameter, or Muon for the matrices inside the
// blocks and AdamW for the rest (optim/run_optimizer.h).
enum class Optimizer { kAdamW, kMuon };
inline constexpr std::array<std::pair<Optimizer, const char*>, 2> kOptimizerNames{
    {{Optimizer::kAdamW, "adamw"}, {Optimizer::kMuon, "muon"}}};
inline const auto& enum_names(Optimizer) { return kOptimizerNames; }
inline const char* name(Optimizer o) { return schema::enum_name(o); }

// Whether train.shard_optimizer can split this optimizer's state over ranks: AdamW's
// (ZeRO-1, optim/zero.h), not Muon's momentum (docs/training.md#muon says why).
inline bool shardable(Optimizer o) { return o == Optimizer::kAdamW; }

// train.adamw: ATen's fused kernel where it runs, the fused kernel, or
// torch::optim::AdamW (optim/optimizer.h).
enum class AdamWImpl { kAuto, kFused, kTorch };
inline constexpr std::array<std::pair<AdamWImpl, const char*>, 3> kAdamWImplNames{
    {{AdamWImpl::kAuto, "auto"}, {AdamWImpl::kFused, "fused"}, {AdamWImpl::kTorch, "torch"}}};
inline const auto& enum_names(AdamWImpl) { return kAdamWImplNames; }
inline const char* name(AdamWImpl i) { return schema::enum_name(i); }

// train.muon_adjust_lr: Muon's per-matrix rate as torch.optim.Muon's adjust_lr_fn
// names it (optim/muon.h: muon_adjusted_lr).
enum class MuonAdjustLr { kOriginal, kMatchRmsAdamW };
inline constexpr std::array<std::pair<MuonAdjustLr, const char*>, 2> kMuonAdjustLrNames{
    {{MuonAdjustLr::kOriginal, "original"}, {MuonAdjustLr::kMatchRmsAdamW, "match_rms_adamw"}}};
inline const auto& enum_names(MuonAdjustLr) { return kMuonAdjustLrNames; }
inline const char* name(MuonAdjustLr a) { return schema::enum_name(a); }

}  // namespace xsagpt
