// The ladder's rules read from the sweep file, and its rungs sized by them (see ladder.h).
#include "sweep/ladder.h"

#include "config/attention_kinds.h"
#include "model/counts.h"
#include "sweep/ladder_budgets.h"
#include "sweep/ladder_rules.h"
#include "util/paths.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

namespace xsagpt {

namespace fs = std::filesystem;

const std::vector<std::string>& ladder_keys() {
  static const std::vector<std::string> keys{"model.n_layer",       "model.d_model",      "model.n_head",
                                             "model.head_dim",      "model.base",         "train.lr",
                                             "train.max_steps",     "train.warmup_steps", "train.eval_interval",
                                             "train.ckpt_interval", "train.ckpt_steps"};
  return keys;
}

std::string lr_override(double lr) { return "train.lr=" + json(lr).dump(); }

namespace {

struct RungSpec {
  std::string name, preset;
  int64_t depth = 0;
  std::vector<std::string> set;  // the rung's own overrides
};

// Who besides the rung sets `key` on its points, in words; "" when nobody does.
std::string others_setting(const std::string& key, const PointKeys& others) {
  std::vector<std::string> who;
  if (const auto it = others.find(key); it != others.end()) who = it->second;
  const bool kind_key = key == "model.attention" || (key.starts_with("model.") && find_kind_key(key.substr(6)));
  if (kind_key && who.empty()) who.push_back("the variants (what each variant is)");
  return fmt::format("{}", fmt::join(who, ", "));
}

// A rung's own "set": overrides of that rung alone, never of what the ladder, the
// variants or the grid set (PointKeys in ladder.h).
std::vector<std::string> rung_set(const json& set, const std::string& where, const PointKeys& others) {
  if (!set.is_object()) schema::bad(where, "an object of \"section.key\": value", set);
  std::vector<std::string> out;
  for (const auto& [key, value] : set.items()) {
    const auto& owned = ladder_keys();
    if (key == "out_dir" || std::find(owned.begin(), owned.end(), key) != owned.end())
      throw ConfigError(fmt::format("{}: {} is set by the ladder itself (or the sweep's out_dir)", where, key));
    if (const auto who = others_setting(key, others); !who.empty())
      throw ConfigError(fmt::format(
          "{}: {} is set by {}; a rung's own \"set\" may not change it, or that rung's points would train "
          "something else under the same name (a rung's own set is for what trains the same model the same "
          "way: micro_batch, checkpointing, data paths)",
          where, key, who));
    out.push_back(key + "=" + value.dump());
  }
  return out;
}

std::vector<RungSpec> read_rung_specs(const json& rs, const std::string& where, const PointKeys& others) {
  if (rs.size() < 2)
    schema::bad(where + ".rungs", "a list of at least 2 sizes (depths or model presets), smallest first", rs);
  std::vector<RungSpec> out;
  std::set<std::string> names;
  for (size_t i = 0; i < rs.size(); ++i) {
    const std::string at = fmt::format("{}.rungs[{}]", where, i);
    json r = rs[i];
    RungSpec spec;
    if (r.is_object()) {
      RungSection own;  // its "slurm" is read with the sweep's (sweep/slurm_spec.h)
      file_keys::read(r, own, at);
      if (!own.set.is_null()) spec.set = rung_set(own.set, at + ".set", others);
      if (own.depth.has_value() == own.preset.has_value()) schema::bad(at, "one of \"depth\" or \"preset\"", r);
      r = own.depth ? json(*own.depth) : json(*own.preset);
    }
    if (r.is_string()) {
      spec.preset = spec.name = r.get<std::string>();
    } else {
      spec.depth = schema::read_integer<int64_t>(r, at);
      if (spec.depth < 1) schema::bad(at, "a depth (model.n_layer) >= 1", r);
      spec.name = fmt::format("d{}", spec.depth);
    }
    if (!names.insert(spec.name).second) throw ConfigError(fmt::format("{}: rung {} is listed twice", at, spec.name));
    out.push_back(std::move(spec));
  }
  return out;
}

// Size overrides of a rung: a depth by the width rule, or the preset's own sizes (set
// after model.base, so that a base config that sizes its model cannot resize the rung).
std::vector<std::string> size_overrides(const RungSpec& r, const LadderSection& section, const std::string& where) {
  int64_t L = r.depth, d = 0, hd = 0;
  if (!r.preset.empty()) {
    ModelConfig m;
    try {
      m = load_model_config(r.preset);
    } catch (const ConfigError& e) {
      throw ConfigError(fmt::format("{}.rungs: preset {}: {}", where, r.preset, e.what()));
    }
    return {"model.base=" + json(r.preset).dump(), fmt::format("model.n_layer={}", m.n_layer),
            fmt::format("model.d_model={}", m.d_model), fmt::format("model.n_head={}", m.n_head),
            fmt::format("model.head_dim={}", m.head_dim)};
  }
  for (const auto& [k, v] : {std::pair{"aspect", section.aspect}, std::pair{"head_dim", section.head_dim}}) {
    if (!v)
      throw ConfigError(
          fmt::format("{}.{}: required with depth rungs (d_model = n_layer x aspect, n_head = "
                      "d_model / head_dim)",
                      where, k));
    if (*v < 1) schema::bad(fmt::format("{}.{}", where, k), "an integer >= 1", json(*v));
  }
  const auto aspect = *section.aspect;
  hd = *section.head_dim;
  d = L * aspect;
  if (d % hd != 0)
    throw ConfigError(
        fmt::format("{}.rungs: depth {} gives d_model {} x {} = {}, not a multiple of head_dim {} "
                    "(n_head would be {:.4g}); choose an aspect or head_dim that divides",
                    where, L, L, aspect, d, hd, static_cast<double>(d) / static_cast<double>(hd)));
  return {fmt::format("model.n_layer={}", L), fmt::format("model.d_model={}", d),
          fmt::format("model.n_head={}", d / hd), fmt::format("model.head_dim={}", hd)};
}

// The base's interval over its max_steps, as the same fraction of a rung's steps: 0
// stays 0 (never, or only at the end), anything else at least 1 step.
int64_t stretched(int64_t interval, int64_t base_steps, int64_t steps) {
  if (interval <= 0) return 0;
  const double frac = static_cast<double>(interval) / static_cast<double>(base_steps);
  return std::max<int64_t>(1, std::llround(frac * static_cast<double>(steps)));
}

// The base's warmup and intervals stretched to `shape` steps (the rung's shortest budget,
// which its budgets share).
std::vector<std::string> schedule_overrides(const TrainConfig& base, int64_t shape) {
  return {fmt::format("train.warmup_steps={}", std::min(shape, stretched(base.warmup_steps, base.max_steps, shape))),
          fmt::format("train.eval_interval={}", stretched(base.eval_interval, base.max_steps, shape)),
          fmt::format("train.ckpt_interval={}", stretched(base.ckpt_interval, base.max_steps, shape))};
}

// The training compute of a run config: flops_per_token x every token of its steps.
double run_compute(const RunConfig& c) {
  const int64_t per_step = c.train.batch_tokens > 0 ? c.train.batch_tokens : c.tokens_per_micro_step(1);
  return flops_per_token(c.model, c.train.seq_len) * static_cast<double>(per_step) *
         static_cast<double>(c.train.max_steps);
}

void read_extrapolation(SweepLadder& l, const LadderSection& section, bool decades_asked, const std::string& path,
                        const std::string& where) {
  std::vector<fs::path> files;
  if (section.extrapolate_to) {
    for (const auto& f : *section.extrapolate_to) {
      fs::path p = f;
      if (!fs::exists(p) && fs::exists(fs::path(path).parent_path() / p)) p = fs::path(path).parent_path() / p;
      files.push_back(p);
    }
    if (files.empty()) l.extrapolate_note = "extrapolate_to is empty";
  } else if (const auto root = project_root()) {
    for (const char* size : {"0.7b", "1.4b", "2.7b"})
      files.push_back(*root / "configs" / "runs" / fmt::format("paper-{}.json", size));
  } else {
    l.extrapolate_note = "the paper's run configs (configs/runs/paper-*.json) were not found beside the program";
  }
  l.extrapolate_decades = section.extrapolate_decades;
  l.extrapolate_decades_asked = decades_asked;
  for (const auto& f : files) {
    try {
      l.extrapolate_to.emplace_back(f.stem().string(), run_compute(load_run_config(f.string())));
    } catch (const ConfigError& e) {
      throw ConfigError(fmt::format("{}.extrapolate_to: {}", where, e.what()));
    }
  }
}

// A rule's budget, before it becomes steps: a run counts its tokens in 64 bits, and a
// budget past that would wrap into a negative step count that a key the user never set
// (train.warmup_steps) would be blamed for.
void check_budget(double budget, const std::string& rule, const std::string& at) {
  constexpr double kMostTokens = 4611686018427387904.0;  // 2^62: steps x tokens per step, with room to spare
  if (!std::isfinite(budget) || budget > kMostTokens)
    throw ConfigError(fmt::format("{}: the token rule ({}) gives {:.3g} tokens, past 2^62 (4.6e18), the most a run "
                                  "counts; choose a smaller budget",
                                  at, rule, budget));
}

// A rule's rate, and each multiple of it swept, before it becomes train.lr: a power
// law in width can overflow to inf (or underflow to 0), which JSON writes as null.
void check_rate(double lr, const std::vector<double>& multipliers, const std::string& rule, int64_t d_model,
                const std::string& at) {
  auto bad = [](double x) { return !(std::isfinite(x) && x > 0); };
  if (bad(lr))
    throw ConfigError(fmt::format("{}: the rate rule ({}) gives {} at d_model {}, not a finite positive rate; choose "
                                  "an anchor and width_exponent that stay in range",
                                  at, rule, lr, d_model));
  for (double m : multipliers)
    if (bad(lr * m))
      throw ConfigError(fmt::format("{}: the rate rule's {:g} times lr_multipliers' {:g} gives {}, not a finite "
                                    "positive rate",
                                    at, lr, m, lr * m));
}

// tune_rungs and tune_past_edge, checked against the multipliers and the rungs.
void read_tuning(SweepLadder& l, const LadderSection& ls, size_t n_rungs, const std::string& where) {
  if (ls.tune_past_edge && !ls.tune_rungs)
    throw ConfigError(where + ".tune_past_edge: goes with tune_rungs (the rungs it tunes at)");
  if (!ls.tune_rungs) return;
  if (l.lr_multipliers.size() < 2)
    throw ConfigError(
        fmt::format("{}.tune_rungs: needs lr_multipliers with at least 2 multipliers to choose "
                    "from (has {})",
                    where, l.lr_multipliers.size()));
  if (*ls.tune_rungs < 1 || static_cast<size_t>(*ls.tune_rungs) >= n_rungs)
    schema::bad(where + ".tune_rungs",
                fmt::format("a number of rungs from 1 to {} (fewer than the {} rungs)", n_rungs - 1, n_rungs),
                json(*ls.tune_rungs));
  l.tune_rungs = static_cast<size_t>(*ls.tune_rungs);
  l.tune_past_edge = ls.tune_past_edge;
}

// The multipliers rung i may run at: every one at a tuning rung (and those past the
// edges with tune_past_edge), one of them above.
std::vector<double> tried_multipliers(const SweepLadder& l, size_t i) {
  auto out = l.lr_multipliers;
  if (l.tune_past_edge && tunes_at(l, i)) {
    const auto [lo, hi] = past_edge_multipliers(l.lr_multipliers);
    out.push_back(lo);
    out.push_back(hi);
  }
  return out;
}

}  // namespace

std::pair<double, double> past_edge_multipliers(const std::vector<double>& multipliers) {
  auto m = multipliers;
  std::sort(m.begin(), m.end());
  const size_t n = m.size();
  // Rounded to 12 digits: 0.3 x 0.3 / 0.03 is 3, not 2.9999999999999996, in a point's name.
  auto round = [](double x) { return std::stod(fmt::format("{:.12g}", x)); };
  return {round(m[0] * m[0] / m[1]), round(m[n - 1] * m[n - 1] / m[n - 2])};
}

SweepLadder read_ladder(const json& section, const std::string& path, const ResolveConfig& resolve,
                        int64_t world_size, const PointKeys& others) {
  const std::string where = path + ": ladder";
  LadderSection ls;
  file_keys::read(section, ls, where);
  if (!(std::isfinite(ls.extrapolate_decades) && ls.extrapolate_decades >= 0))
    schema::bad(where + ".extrapolate_decades", "a number of decades of compute >= 0", section["extrapolate_decades"]);
  const auto specs = read_rung_specs(ls.rungs, where, others);
  const auto tokens = read_token_rule(ls.tokens, specs.size(), where);
  const auto lr = read_lr_rule(ls.lr, specs.size(), where);
  SweepLadder l;
  if (!ls.lr_multipliers.is_null()) l.lr_multipliers = read_multipliers(ls.lr_multipliers, where + ".lr_multipliers");
  read_tuning(l, ls, specs.size(), where);
  if (!ls.estimate.is_null())
    l.estimate = read_estimate(ls.estimate, where + ".estimate", fs::path(path).parent_path());
  const auto base = resolve({}).train;
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto& s = specs[i];
    const std::string at = fmt::format("{}.rungs[{}] ({})", where, i, s.name);
    LadderRung r;
    r.name = s.name;
    r.overrides = size_overrides(s, ls, where);
    r.overrides.insert(r.overrides.end(), s.set.begin(), s.set.end());
    try {
      r.config = resolve(r.overrides);
    } catch (const ConfigError& e) {
      throw ConfigError(fmt::format("{}: {}", at, e.what()));
    }
    r.step_tokens =
        r.config.train.batch_tokens > 0 ? r.config.train.batch_tokens : r.config.tokens_per_micro_step(world_size);
    std::vector<int64_t> steps;  // each budget's, ascending
    for (size_t b = 0; b < tokens.budgets(); ++b) {
      std::tie(r.budget_tokens, r.budget_params) = tokens(i, r.config.model, r.config.train.seq_len, b);
      check_budget(r.budget_tokens, tokens.words, at);
      if (r.budget_tokens < static_cast<double>(r.step_tokens))
        throw ConfigError(fmt::format("{}: its budget is {:.0f} tokens ({}), less than one step of {} tokens", at,
                                      r.budget_tokens, tokens.words, r.step_tokens));
      steps.push_back(std::llround(r.budget_tokens / static_cast<double>(r.step_tokens)));
    }
    for (auto& o : schedule_overrides(base, steps.front())) r.overrides.push_back(o);
    if (steps.size() > 1)
      r.budgets = ladder_budgets(
          tokens, steps, r.step_tokens,
          [&](const std::vector<std::string>& budget) {
            auto all = r.overrides;
            all.insert(all.end(), budget.begin(), budget.end());
            return resolve(all);
          },
          at);
    else
      r.overrides.push_back(fmt::format("train.max_steps={}", steps.front()));
    r.lr = lr(i, r.config.model.d_model);
    check_rate(r.lr, tried_multipliers(l, i), lr.words, r.config.model.d_model, at);
    try {
      auto with_rate = r.overrides;
      if (!r.budgets.empty())
        with_rate.insert(with_rate.end(), r.budgets.back().overrides.begin(), r.budgets.back().overrides.end());
      with_rate.push_back(lr_override(r.lr));
      r.config = resolve(with_rate);
    } catch (const ConfigError& e) {
      throw ConfigError(fmt::format("{}: {}", at, e.what()));
    }
    r.params = count_params(r.config.model).total;
    r.flops_per_token = flops_per_token(r.config.model, r.config.train.seq_len);
    if (!l.rungs.empty() && r.params <= l.rungs.back().params)
      throw ConfigError(
          fmt::format("{}: {} parameters, not more than rung {} before it ({}); list the rungs "
                      "smallest first, each larger",
                      at, r.params, l.rungs.back().name, l.rungs.back().params));
    l.rungs.push_back(std::move(r));
  }
  const bool depths = std::any_of(specs.begin(), specs.end(), [](const RungSpec& s) { return s.depth > 0; });
  l.size_rule =
      depths ? fmt::format("depth rungs: d_model = {} x n_layer, n_head = d_model / {}", *ls.aspect, *ls.head_dim)
             : "model presets";
  l.token_rule = tokens.words;
  l.lr_rule = lr.words;
  l.schedule_rule = fmt::format(
      "the base's schedule stretched to each rung's steps{} (warmup {}, evaluation every {}, checkpoint every {} of "
      "its {} steps){}",
      tokens.budgets() > 1 ? ", its shortest budget's, which its budgets share" : "", base.warmup_steps,
      base.eval_interval, base.ckpt_interval, base.max_steps, tokens.budgets() > 1 ? branch_rule(base) : "");
  read_extrapolation(l, ls, section.contains("extrapolate_decades"), path, where);
  return l;
}

}  // namespace xsagpt
