// Each variant's rate, tuned at the ladder's smallest rungs (see ladder_tuning.h).
#include "sweep/ladder_tuning.h"

#include "sweep/ladder_points.h"
#include "sweep/point_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

namespace xsagpt {

namespace {

// One multiplier's tuning points of one variant, as they stand.
struct Tried {
  double sum = 0;
  size_t n = 0, points = 0, unfinished = 0;
  double mean() const { return sum / static_cast<double>(n); }
};

// The multiplier with the most finished points, then the lowest mean; NaN if none finished.
double best_of(const std::map<double, Tried>& tried) {
  double best = std::nan("");
  for (const auto& [m, t] : tried) {
    if (!t.n) continue;
    if (std::isnan(best) || t.n > tried.at(best).n || (t.n == tried.at(best).n && t.mean() < tried.at(best).mean()))
      best = m;
  }
  return best;
}

bool at_edge(const std::map<double, Tried>& tried, double m) {
  return m == tried.begin()->first || m == tried.rbegin()->first;
}

size_t unfinished(const std::map<double, Tried>& tried) {
  size_t n = 0;
  for (const auto& [m, t] : tried) n += t.unfinished;
  return n;
}

}  // namespace

std::vector<LadderTuning> tune_variants(const Sweep& s) {
  const auto& l = *s.ladder;
  const auto [below, above] = past_edge_multipliers(l.lr_multipliers);
  std::map<std::string, std::map<double, Tried>> by_variant;
  std::map<std::string, bool> mup;
  for (const auto& p : s.points) {
    if (p.rung < 0 || !tunes_at(l, static_cast<size_t>(p.rung))) continue;
    // With several data ratios the rung's longest run decides: its shorter ratios branch
    // off its stable phase, so they train at its rate whatever suits them alone.
    if (is_branch(s, p)) continue;
    auto& t = by_variant[p.variant][p.lr_mult];
    ++t.points;
    const auto it = mup.emplace(p.variant, true).first;
    it->second = it->second && p.config.model.mup();
    const auto ended = ended_state(p);
    if (!ended) {
      ++t.unfinished;
    } else if (ended->status == PointStatus::kDone && ended->record["final_val_loss"].is_number()) {
      const double loss = ended->record["final_val_loss"].get<double>();
      if (std::isfinite(loss)) t.sum += loss, ++t.n;
    }
  }
  std::vector<LadderTuning> out;
  for (const auto& v : s.variants) {
    LadderTuning t;
    t.variant = v;
    t.mup = mup[v];
    auto tried = by_variant[v];
    std::map<double, Tried> listed;  // the multipliers of lr_multipliers: the choice before any past the edge
    for (double m : l.lr_multipliers) listed[m] = tried[m];
    const auto left = fmt::format("{} tuning point(s) of {}", unfinished(listed), v);
    double best = best_of(listed);
    if (unfinished(listed)) {
      t.waits = left + " at lr_multipliers are not finished";
      best = std::nan("");
    } else if (!std::isnan(best) && l.tune_past_edge && at_edge(listed, best)) {
      t.past_edge = best == listed.begin()->first ? below : above;
      const auto& past = tried[*t.past_edge];
      if (past.points == 0 || past.unfinished) {
        t.waits = fmt::format("its best multiplier x{:g} is at the edge; its tuning rungs at x{:g} are not finished",
                              best, *t.past_edge);
        best = std::nan("");
      } else {
        listed[*t.past_edge] = past;
        best = best_of(listed);
      }
    } else if (std::isnan(best)) {
      t.waits = fmt::format("no tuning point of {} finished with a usable loss", v);
    }
    for (const auto& [m, c] : listed)
      t.candidates.push_back({{"lr_mult", m},
                              {"mean_final_val_loss", c.n ? json(c.mean()) : json(nullptr)},
                              {"n", c.n},
                              {"points", c.points}});
    if (!std::isnan(best)) {
      t.lr_mult = best;
      t.at_edge = at_edge(listed, best);
    }
    out.push_back(std::move(t));
  }
  return out;
}

Sweep load_tuned_sweep(const std::string& path, int64_t world_size) {
  auto s = load_sweep(path, world_size);
  if (!s.ladder || !s.ladder->tune_rungs) return s;
  const auto& l = *s.ladder;
  auto add = [&](size_t i, double m, const std::string& variant) {
    for (const auto& step : rung_steps(l, i, m, variant))
      s.add_points(s, step, [&](SweepPoint p) { s.points.push_back(std::move(p)); });
  };
  s.tuning = tune_variants(s);
  bool past = false;
  for (const auto& t : s.tuning)
    if (t.past_edge) {
      past = true;
      for (size_t i = 0; i < l.tune_rungs; ++i) add(i, *t.past_edge, t.variant);
    }
  if (past) s.tuning = tune_variants(s);
  for (const auto& t : s.tuning) {
    if (!t.lr_mult) continue;
    std::erase_if(s.waiting, [&](const SweepPoint& p) { return p.variant == t.variant; });
    for (size_t i = l.tune_rungs; i < l.rungs.size(); ++i) add(i, *t.lr_mult, t.variant);
  }
  link_branches(s);
  return s;
}

std::string tuning_origin(const SweepLadder& l, const LadderTuning& t) {
  const auto& first = l.rungs.front().name;
  const auto& last = l.rungs[l.tune_rungs - 1].name;
  const auto where = l.tune_rungs == 1 ? first : first + "-" + last;
  const auto mult = t.lr_mult ? fmt::format(" (x{:g}{})", *t.lr_mult, t.at_edge ? ", at the edge of those tried" : "")
                              : std::string(" (not yet: ") + t.waits + ")";
  return fmt::format("tuned at {}{}, carried by {}", where, mult,
                     t.mup ? "μP" : "the rate rule, which was not shown to transfer");
}

}  // namespace xsagpt
