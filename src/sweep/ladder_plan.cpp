// The ladder's plan and the dry run's time estimate (see ladder_plan.h).
#include "sweep/ladder_plan.h"

#include "model/counts.h"
#include "sweep/ladder_rules.h"
#include "sweep/ladder_tuning.h"
#include "train/mfu.h"
#include "util/device.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <optional>

namespace xsagpt {

namespace {

// A count in engineering units: 3.2M, 41.0K, 2.1e+13 for FLOPs (si_count(x, true)).
std::string si_count(double x, bool exponent = false) {
  if (exponent || x >= 1e12) return fmt::format("{:.2e}", x);
  if (x >= 1e9) return fmt::format("{:.2f}B", x / 1e9);
  if (x >= 1e6) return fmt::format("{:.2f}M", x / 1e6);
  if (x >= 1e3) return fmt::format("{:.1f}K", x / 1e3);
  return fmt::format("{:.0f}", x);
}

}  // namespace

std::string plan_duration(double s) {
  if (s < 60) return fmt::format("{:.1f} s", s);
  if (s < 3600) return fmt::format("{:.0f} min {:02.0f} s", std::floor(s / 60), std::fmod(s, 60));
  if (s < 86400 * 3) return fmt::format("{:.1f} h", s / 3600);
  if (s < 86400 * 1e4) return fmt::format("{:.1f} days", s / 86400);
  return fmt::format("{:.2e} days", s / 86400);  // an assumed MFU of 1e-300 must not print 300 digits
}

namespace {

// A point of rung i, of the first variant where it has one: every rung has one among the
// points or, with tune_rungs before its rate is known, among those that wait.
const SweepPoint& rung_point(const Sweep& s, size_t i) {
  const SweepPoint* found = nullptr;
  for (const auto* list : {&s.points, &s.waiting})
    for (const auto& p : *list)
      if (p.rung == static_cast<int>(i) && (!found || (p.variant == s.points.front().variant &&
                                                       found->variant != s.points.front().variant)))
        found = &p;
  return *found;
}

// Measured here (by `measure`): each rung's steps timed while they take seconds (a first step under
// kFirstStepFlops, each later one predicted from the last rate under kMeasureSeconds);
// larger rungs at the last rate measured.
LadderTimes measured_basis(const Sweep& s, int64_t world, std::optional<double> overhead_s, const MeasureStep& measure) {
  const auto& rungs = s.ladder->rungs;
  LadderTimes b;
  b.rate.assign(rungs.size(), std::nullopt);
  b.overhead_s = overhead_s.value_or(3.0);
  torch::Device device = torch::kCPU;
  try {
    device = resolve_device(rungs.front().config.train.device, "train.device");
  } catch (const ConfigError& e) {
    b.rests_on = fmt::format("nothing: {}; name a GPU in ladder.estimate (\"device\" and \"mfu\")", e.what());
    return b;
  }
  if (device.is_cuda()) b.overhead_s = overhead_s.value_or(10.0);
  // Timed at the threads its points train with (train.threads: two processes side by
  // side may run at one each), this process's own restored after.
  struct Threads {
    int before = torch::get_num_threads();
    ~Threads() { torch::set_num_threads(before); }
  } restore;
  if (!device.is_cuda()) setup_cpu_threads(rungs.front().config.train.threads, "train.threads");
  const double first_cap = device.is_cuda() ? 1e14 : 2e11;  // FLOPs of one step: seconds on either
  constexpr double kMeasureSeconds = 20;
  std::optional<double> last;
  size_t measured = 0;
  for (size_t i = 0; i < rungs.size(); ++i) {
    const auto& r = rungs[i];
    const double step_flops = r.flops_per_token * static_cast<double>(r.step_tokens);
    const bool quick = last ? 4 * step_flops / *last < kMeasureSeconds : step_flops < first_cap;
    if (quick) {
      last = measure(rung_point(s, i).config, device, world);
      ++measured;
    }
    b.rate[i] = last;
  }
  if (!measured) {
    b.rests_on = fmt::format(
        "nothing: one step of the smallest rung is {:.2g} FLOPs, too long to time on {}; name a GPU in "
        "ladder.estimate (\"device\" and \"mfu\") or a bench file (\"bench\")",
        rungs.front().flops_per_token * static_cast<double>(rungs.front().step_tokens), device_name(device));
    return b;
  }
  b.rests_on = fmt::format(
      "measured here: 3 training steps of each rung's {} model on {} ({}){}; every variant at that rate",
      s.points.front().variant, device_name(device), device.is_cuda() ? "GPU" : cpu_threads_description(),
      measured < rungs.size() ? fmt::format(", the {} largest rung(s) at the rate of the last one measured (their "
                                            "steps would take too long to time here)",
                                            rungs.size() - measured)
                              : "");
  return b;
}

}  // namespace

LadderTimes ladder_times(const Sweep& s, int64_t world, const MeasureStep& measure) {
  const auto& e = s.ladder->estimate;
  const auto overhead = e ? e->overhead_s : std::nullopt;
  if (!(e && (e->device || e->bench))) return measured_basis(s, world, overhead, measure);
  LadderTimes b;
  b.overhead_s = overhead.value_or(10.0);
  double rate = 0;
  if (e->bench) {
    rate = bench_file_rate(*e, b.rests_on);
  } else {
    const auto name = *e->device;
    const bool bf16 = parse_precision(s.ladder->rungs.front().config.train.precision, /*cuda=*/true);
    const double peak = *gpu_peak_flops(name, bf16);  // read_estimate made sure the name is known
    const double mfu = *e->mfu;
    rate = peak * mfu;
    b.rests_on = fmt::format(
        "assumed: one {} at MFU {:.0f}% of its dense {} peak {:.0f} TFLOP/s = {:.0f} TFLOP/s (ladder.estimate; "
        "measured MFU of the default kernels on one H100: 38-40% at 124M, 48-49% at 0.7B, docs/benchmarks.md)",
        name, 100 * mfu, bf16 ? "bf16" : "TF32", peak / 1e12, rate / 1e12);
  }
  b.rate.assign(s.ladder->rungs.size(), rate);
  return b;
}

namespace {

// The step a point's training starts from: 0, or a branch's start (sweep/branch.h),
// which its source trained; 0 too as the point's own run from scratch.
int64_t first_step(const Sweep& s, const SweepPoint& p, bool from_scratch) {
  if (from_scratch || !is_branch(s, p)) return 0;
  return s.ladder->rungs[p.rung].budgets[p.budget].branch_step;
}

// Evaluation's FLOPs in a point's training from step `from`: forward only (a third of
// training's per token) over the val tokens at every evaluation (step 0, each interval,
// the end); nullopt when train.eval_tokens is 0 (the whole val set, whose size the plan
// does not read).
std::optional<double> eval_flops(const SweepPoint& p, const LadderRung& r, int64_t world, int64_t from) {
  const auto& t = p.config.train;
  if (t.eval_tokens == 0) return std::nullopt;
  const int64_t batch = p.config.tokens_per_micro_step(world);
  const double tokens = static_cast<double>(t.eval_tokens / batch * batch);
  const int64_t i = t.eval_interval;  // 0: at the end only
  const int64_t evals = i > 0 ? (from == 0) + t.max_steps / i - from / i + (t.max_steps % i != 0) : 1;
  return static_cast<double>(evals) * tokens * r.flops_per_token / 3;
}

// The training FLOPs of a point from step `from` on.
double train_flops(const SweepPoint& p, const LadderRung& r, int64_t from) {
  return r.flops_per_token * static_cast<double>(r.step_tokens) * static_cast<double>(p.config.train.max_steps - from);
}

}  // namespace

std::optional<double> ladder_point_seconds(const Sweep& s, const SweepPoint& p, const LadderTimes& times, int64_t ranks,
                                           bool from_scratch) {
  const auto& r = s.ladder->rungs[p.rung];
  const auto rate = times.rate[p.rung];
  if (!rate) return std::nullopt;
  const int64_t from = first_step(s, p, from_scratch);
  // A rate is one process's: ranks of a data-parallel run share the step's tokens.
  const double flops = train_flops(p, r, from) + eval_flops(p, r, ranks, from).value_or(0);
  return times.overhead_s + flops / (*rate * static_cast<double>(ranks));
}

std::optional<double> ladder_checkpoint_seconds(const Sweep& s, const SweepPoint& p, const LadderTimes& times,
                                                int64_t ranks) {
  const auto& r = s.ladder->rungs[p.rung];
  const auto rate = times.rate[p.rung];
  const int64_t interval = p.config.train.ckpt_interval;
  if (!rate || interval <= 0 || interval >= p.config.train.max_steps) return std::nullopt;
  const double step_flops = r.flops_per_token * static_cast<double>(r.step_tokens);
  return times.overhead_s + static_cast<double>(interval) * step_flops / (*rate * static_cast<double>(ranks));
}

void print_ladder_rungs(const Sweep& s) {
  const auto& l = *s.ladder;
  std::cout << fmt::format(
      "ladder: {} rungs; {}; {}; {}{}; {}\n", l.rungs.size(), l.size_rule, l.token_rule, l.lr_rule,
      l.lr_multipliers.empty() ? "" : fmt::format(" times each of {}", json(l.lr_multipliers).dump()), l.schedule_rule);
  // Both parameter counts, and the tokens per non-embedding parameter: the ratio at
  // which small models are said to follow compute (about 10-20) counts the blocks only.
  std::cout << fmt::format("  {:<12} {:>7} {:>7} {:>6} {:>12} {:>12} {:>14} {:>10} {:>9} {:>7} {:>10} {:>10}\n",
                           "rung", "n_layer", "d_model", "n_head", "params", "non-emb", "tokens", "tok/non-emb",
                           "steps", "warmup", "lr", "FLOPs");
  for (const auto& r : l.rungs) {
    const auto& m = r.config.model;
    const int64_t blocks = count_params(m).non_embedding;
    std::cout << fmt::format(
        "  {:<12} {:>7} {:>7} {:>6} {:>12} {:>12} {:>14} {:>10.1f} {:>9} {:>7} {:>10.4g} {:>10}\n", r.name,
        m.n_layer, m.d_model, m.n_head, r.params, blocks, r.tokens(),
        static_cast<double>(r.tokens()) / static_cast<double>(std::max<int64_t>(blocks, 1)), r.steps(),
        r.config.train.warmup_steps, r.lr, si_count(r.flops(), true));
    for (const auto& b : r.budgets)
      std::cout << fmt::format("    ratio {:g}: {} tokens, {} steps, decay from step {}{}\n", b.ratio,
                               b.steps * r.step_tokens, b.steps, b.branch_step,
                               b.steps == r.steps()
                                   ? " (the rung's run: the other ratios branch off it)"
                                   : fmt::format(" (a branch: trains {} steps)", b.steps - b.branch_step));
  }
  if (!l.tune_rungs) return;
  std::cout << fmt::format(
      "tuning: every multiplier at the {} smallest rung(s){}; each variant's best carried above:\n", l.tune_rungs,
      l.tune_past_edge ? ", one more past an edge that wins" : "");
  std::vector<std::string> by_rule;
  for (const auto& t : s.tuning) {
    std::cout << fmt::format("  {:<12} {}\n", t.variant, tuning_origin(l, t));
    if (!t.mup) by_rule.push_back(t.variant);
  }
  const bool mup = std::any_of(s.tuning.begin(), s.tuning.end(), [](const auto& t) { return t.mup; });
  if (mup && std::any_of(l.rungs.begin(), l.rungs.end(), [&](const auto& r) { return r.lr != l.rungs.front().lr; }))
    spdlog::warn(
        "the rate rule ({}) changes the rate with width, which μP does already: a tuned rate carried by μP "
        "holds at the tuning rungs' rate; give the ladder a rate that stays the same across its rungs",
        l.lr_rule);
  if (!by_rule.empty())
    spdlog::warn(
        "{}: the tuned rate is carried to the larger rungs by the ladder's rate rule ({}), which nothing "
        "has shown to transfer across width; under model.parametrization \"mup\" it carries by μP "
        "(docs/mup-transfer.md)",
        fmt::join(by_rule, ", "), l.lr_rule);
}

namespace {

// With tune_rungs: what the ladder costs against tuning at every rung (every multiplier at
// every rung), and at most what the multipliers past an edge add (each variant's tuning
// rungs at one more multiplier, where its best is at an edge).
void print_tuning_price(const Sweep& s, int64_t world, const LadderTimes& basis, double flops, double secs,
                        bool unknown) {
  const auto& l = *s.ladder;
  // Per rung, one variant's points at one multiplier (every grid setting and data ratio):
  // what each multiplier of each variant costs there.
  size_t n_set = 0;
  double all_flops = 0, all_s = 0, past_flops = 0, past_s = 0;
  const double n_variants = static_cast<double>(s.variants.size());
  const double n_mults = static_cast<double>(l.lr_multipliers.size());
  for (size_t i = 0; i < l.rungs.size(); ++i) {
    const auto& first = rung_point(s, i);
    double f = 0, t = 0;
    for (const auto* list : {&s.points, &s.waiting})
      for (const auto& p : *list)
        if (p.rung == first.rung && p.variant == first.variant && p.lr_mult == first.lr_mult) {
          ++n_set;
          f += train_flops(p, l.rungs[i], first_step(s, p, false));
          t += ladder_point_seconds(s, p, basis, world).value_or(0);
        }
    all_flops += n_variants * n_mults * f, all_s += n_variants * n_mults * t;
    if (l.tune_past_edge && tunes_at(l, i)) past_flops += n_variants * f, past_s += n_variants * t;
  }
  auto cost = [&](double f, double t) {
    return unknown ? si_count(f, true) + " FLOPs"
                   : fmt::format("{} FLOPs, about {}", si_count(f, true), plan_duration(t));
  };
  std::cout << fmt::format(
      "tuning at the {} smallest rung(s) (tune_rungs): {}; tuning at every rung instead: {} points, {} ({:.2g}x "
      "the FLOPs){}\n",
      l.tune_rungs, cost(flops, secs), n_set * s.variants.size() * l.lr_multipliers.size(),
      cost(all_flops, all_s), all_flops / flops,
      l.tune_past_edge ? fmt::format("; past an edge (tune_past_edge) at most {} more", cost(past_flops, past_s)) : "");
}

}  // namespace

LadderTimes print_ladder_estimate(const Sweep& s, int64_t world, const MeasureStep& measure) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto basis = ladder_times(s, world, measure);
  const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << fmt::format("time, as each point would train (estimate):\n  {:<48} {:>9} {:>10} {:>10} {:>10}\n",
                           "point", "params", "tokens", "FLOPs", "time");
  double total_flops = 0, total_s = 0, scratch_flops = 0, scratch_s = 0;
  bool unknown = false, no_eval = false;
  std::vector<const SweepPoint*> listed;
  for (const auto* list : {&s.points, &s.waiting})
    for (const auto& p : *list) listed.push_back(&p);
  for (const auto* point : listed) {
    const auto& p = *point;
    const auto& r = s.ladder->rungs[p.rung];
    const int64_t from = first_step(s, p, false);
    no_eval |= !eval_flops(p, r, world, from);
    total_flops += train_flops(p, r, from);
    scratch_flops += train_flops(p, r, 0);
    std::string time = "-";
    if (const auto secs = ladder_point_seconds(s, p, basis, world)) {
      total_s += *secs;
      scratch_s += *ladder_point_seconds(s, p, basis, world, true);
      time = plan_duration(*secs);
    } else {
      unknown = true;
    }
    std::cout << fmt::format("  {:<48} {:>9} {:>10} {:>10} {:>10}{}\n", p.name, si_count(static_cast<double>(r.params)),
                             si_count(static_cast<double>(p.config.train.max_steps * r.step_tokens)),
                             si_count(train_flops(p, r, from), true), time,
                             from ? fmt::format("  (a branch from step {})", from) : "");
  }
  auto seconds = [&](double total) {
    return unknown ? "no time estimate for every point"
                   : fmt::format("about {} ({} s)", plan_duration(total),
                                 total < 1e12 ? fmt::format("{:.0f}", total) : fmt::format("{:.3g}", total));
  };
  std::cout << fmt::format(
      "total: {} points{}, {} training FLOPs, {}\n", listed.size(),
      s.waiting.empty() ? "" : fmt::format(" ({} wait for the tuning rungs' rate)", s.waiting.size()),
      si_count(total_flops, true), seconds(total_s));
  if (scratch_flops > total_flops)
    std::cout << fmt::format(
        "  each data ratio its own run from scratch instead of a branch: {} training FLOPs, {}; the branches "
        "save {:.0f}%\n",
        si_count(scratch_flops, true), seconds(scratch_s), 100 * (1 - total_flops / scratch_flops));
  std::cout << fmt::format(
      "the time rests on {}{}; plus {:g} s per point (start, checkpoints, summary){}{}\n", basis.rests_on,
      world > 1 ? fmt::format(", times {} ranks (assumed to scale linearly)", world) : "", basis.overhead_s,
      no_eval ? "; evaluation of the whole val set (eval_tokens 0) not counted"
              : "; evaluation counted as forward FLOPs",
      spent > 1 ? fmt::format(" (measuring took {:.1f} s)", spent) : "");
  if (s.ladder->tune_rungs) print_tuning_price(s, world, basis, total_flops, total_s, unknown);
  return basis;
}

}  // namespace xsagpt
