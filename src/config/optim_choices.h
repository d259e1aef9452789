// The optimizer's fixed choices in a run config (train.optimizer, train.adamw,
// train.muon_adjust_lr, train.schedule) as enums, each with the one table of its JSON names
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

// train.schedule: the learning rate's shape after warmup (optim/schedule.h): a cosine
// over the rest of the run, or warmup-stable-decay (a constant rate, then a decay over
// the run's last train.decay_fraction).
enum class Schedule { kCosine, kWsd };
inline constexpr std::array<std::pair<Schedule, const char*>, 2> kScheduleNames{
    {{Schedule::kCosine, "cosine"}, {Schedule::kWsd, "wsd"}}};
inline const auto& enum_names(Schedule) { return kScheduleNames; }
inline const char* name(Schedule s) { return schema::enum_name(s); }

}  // namespace xsagpt
