// Sweeps on Slurm: arrays by shape and their checks (see slurm_plan.h).
#include "sweep/slurm_plan.h"

#include "sweep/ladder_tuning.h"

#include <fmt/format.h>

#include <map>

namespace xsagpt {

namespace {

// How a shape's points are named in messages: their rungs, or every point.
std::string array_label(const Sweep& sweep, const std::vector<size_t>& points) {
  if (!sweep.ladder) return "every point";
  std::vector<int> rungs;
  for (const auto i : points)
    if (std::find(rungs.begin(), rungs.end(), sweep.points[i].rung) == rungs.end()) rungs.push_back(sweep.points[i].rung);
  std::string names;
  for (const auto r : rungs) names += (names.empty() ? "" : ", ") + sweep.ladder->rungs[static_cast<size_t>(r)].name;
  return (rungs.size() > 1 ? "rungs " : "rung ") + names;
}

}  // namespace

std::vector<SlurmArray> slurm_arrays(const Sweep& sweep) {
  std::vector<SlurmArray> arrays, branches;
  for (size_t i = 0; i < sweep.points.size(); ++i) {
    const auto& s = sweep.slurm->of_rung(sweep.points[i].rung);
    const auto after = sweep.points[i].branch_of;
    auto& in = after ? branches : arrays;
    auto it =
        std::find_if(in.begin(), in.end(), [&](const SlurmArray& a) { return a.settings == s && a.after == after; });
    if (it == in.end()) it = in.insert(in.end(), SlurmArray{s, {}, "", after});
    it->points.push_back(i);
  }
  for (auto& a : arrays) a.label = array_label(sweep, a.points);
  for (auto& a : branches) a.label = "the branches of " + sweep.points[*a.after].name;
  arrays.insert(arrays.end(), branches.begin(), branches.end());
  return arrays;
}

void check_slurm_arrays(const Sweep& sweep, const std::string& sweep_file, const std::vector<SlurmArray>& arrays,
                        const LadderTimes* times) {
  std::map<int64_t, Sweep> at_ranks;  // the sweep as a job of that many ranks resolves it
  for (const auto& a : arrays) {
    const int64_t ranks = a.settings.ranks();
    const std::string where = fmt::format("{}: slurm: the jobs of {} ({} node(s) x {} task(s) = {} rank(s))",
                                          sweep_file, a.label, a.settings.nodes, a.settings.ntasks_per_node, ranks);
    if (ranks > 1 && !at_ranks.contains(ranks)) {
      try {
        at_ranks.emplace(ranks, load_tuned_sweep(sweep_file, ranks));
      } catch (const ConfigError& e) {
        throw ConfigError(fmt::format("{}: {}", where, e.what()));
      }
    }
    for (const auto i : a.points) {
      const auto& p = sweep.points[i];
      if (ranks > 1 && to_json(at_ranks.at(ranks).points.at(i).config) != to_json(p.config))
        throw ConfigError(fmt::format(
            "{}: point {} resolves to another run at {} ranks than in one process (train.batch_tokens 0 makes its "
            "tokens per step grow with the ranks), so --summarize would not recognise what its job trains; set "
            "train.batch_tokens",
            where, p.name, ranks));
      if (!times || !sweep.ladder) continue;
      const auto ckpt = ladder_checkpoint_seconds(sweep, p, *times, ranks);
      const double usable = static_cast<double>(a.settings.time_s - a.settings.signal_s);
      if (ckpt && *ckpt > usable)
        throw ConfigError(fmt::format(
            "{}: time {} less signal_s {} leaves {} per job, shorter than point {}'s {} between checkpoints "
            "(train.ckpt_interval {} steps, the dry run's estimate): a job would end before its first checkpoint; "
            "raise the time or lower the interval",
            where, a.settings.time, a.settings.signal_s, plan_duration(usable), p.name, plan_duration(*ckpt),
            p.config.train.ckpt_interval));
    }
  }
}

}  // namespace xsagpt
