// Sweeps, the ladder's plan: what each rung and point of a ladder (sweep/ladder.h) will
// cost before anything trains: parameters, tokens, steps, rate and training FLOPs per
// rung, and with --dry-run each point's time and the total, with what the time rests on.
//
// A point's time is its FLOPs (training: flops_per_token x tokens; evaluation: a third
// of that per token, forward only, times the evaluations' tokens) over a FLOP rate, plus
// a fixed time per point (start, checkpoints). The rate comes from, in this order:
//   "estimate": {"bench": FILE}   the training step's tokens/s that `xsagpt bench --json
//                FILE` measured ("bench_variant", default its first), times that model's
//                flops_per_token: the FLOP rate achieved there, applied to every rung;
//   "estimate": {"device": NAME, "mfu": m}   a GPU by name (train/mfu.h's peaks: "H100",
//                "H200", "A100", ...) at an assumed MFU m: peak x m. So a GPU ladder is
//                costed from a machine without the GPU, on the stated assumption;
//   neither:     measured here, on the device the points would train on: a few training
//                steps of each rung (the baseline's model, the point's batch), smallest
//                first, as long as a rung's steps take seconds; larger rungs at the rate
//                of the last one measured. The caller times the steps (MeasureStep:
//                `xsagpt sweep` passes bench's step_flop_rate, bench/block_bench.h), so
//                that the sweep does not sit above the benchmarks.
// "overhead_s" sets the time per point (default: 10 s with a GPU, 3 s on a CPU: what the
// GPU demo and configs/sweeps/ladder-tiny.json spent between their points' training, the
// model's start, its checkpoints and the summary after each).
#pragma once

#include "config/run_config.h"
#include "sweep/grid.h"

#include <torch/torch.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace xsagpt {

// The FLOP rate (FLOP/s) of a run config's training step timed on a device, with
// world_size ranks sharing its batch.
using MeasureStep = std::function<double(const RunConfig& config, const torch::Device& device, int64_t world_size)>;

// The FLOP rate each rung trains at per process, and what it rests on: the dry run's
// basis, which `--slurm` also reads (each point's time at its job's ranks).
struct LadderTimes {
  std::vector<std::optional<double>> rate;  // FLOP/s per rung and process; nullopt: no estimate for it
  std::string rests_on;
  double overhead_s = 0;  // per point: start, checkpoints, summary
};

// The basis of the estimate: a bench file's rate, a named GPU's, or steps measured here.
LadderTimes ladder_times(const Sweep& sweep, int64_t world_size, const MeasureStep& measure);

// A point's estimated time with `ranks` processes sharing each step (assumed to scale
// linearly), evaluation included; nullopt without a rate for its rung. A branch
// (sweep/branch.h) trains its decay alone; with from_scratch, its whole run.
std::optional<double> ladder_point_seconds(const Sweep& sweep, const SweepPoint& p, const LadderTimes& times,
                                           int64_t ranks, bool from_scratch = false);

// The estimated time between a point's checkpoints (train.ckpt_interval steps) with
// `ranks` processes; nullopt without a rate or without periodic checkpoints.
std::optional<double> ladder_checkpoint_seconds(const Sweep& sweep, const SweepPoint& p, const LadderTimes& times,
                                                int64_t ranks);

// A duration as the plan prints it: "41.0 s", "12 min 03 s", "5.4 h", "25.8 days".
std::string plan_duration(double seconds);

// The rules and the rungs as a table; every ladder sweep prints it before it runs.
void print_ladder_rungs(const Sweep& sweep);

// The dry run's part: per point its parameters, tokens, FLOPs and estimated time, the
// totals (with several data ratios, beside what each ratio's own run from scratch
// would cost), and what the estimate rests on. Returns the basis, for the dry run's Slurm part.
LadderTimes print_ladder_estimate(const Sweep& sweep, int64_t world_size, const MeasureStep& measure);

}  // namespace xsagpt
