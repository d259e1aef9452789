// done.json (see done_json.h).
#include "run/done_json.h"

#include "run/metrics_history.h"
#include "util/atomic_file.h"

namespace xsagpt {

using json = nlohmann::json;

namespace {

double number_or_nan(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : NAN;
}

}  // namespace

json RunSummary::to_json() const {
  auto num = [](double x) { return std::isfinite(x) ? json(x) : json(nullptr); };
  json j = {{"step", step},
            {"tokens", tokens},
            {"final_train_loss", num(final_train_loss)},
            {"final_val_loss", num(final_val_loss)},
            {"wall_s", wall_s}};
  if (!rank_changes.empty()) j["rank_changes"] = rank_changes;
  return j;
}

RunSummary RunSummary::from_json(const json& j) {
  RunSummary s;
  if (!j.is_object()) return s;
  const auto step = j.value("step", json()), tokens = j.value("tokens", json());
  s.step = step.is_number_integer() ? step.get<int64_t>() : 0;
  s.tokens = tokens.is_number_integer() ? tokens.get<int64_t>() : 0;
  s.final_train_loss = number_or_nan(j, "final_train_loss");
  s.final_val_loss = number_or_nan(j, "final_val_loss");
  s.wall_s = number_or_nan(j, "wall_s");
  try {
    s.rank_changes = j.value("rank_changes", json::array()).get<std::vector<RankChange>>();
  } catch (const json::exception&) {
    // Cut by hand: read as saying nothing, as the other keys.
  }
  return s;
}

void finish_run(const std::filesystem::path& dir, const RunSummary& summary) {
  write_file_atomic(RunPaths(dir).done, summary.to_json().dump(2) + "\n");
}

FinishedRun finished_run(const RunPaths& paths, RunSummary saved) {
  if (!std::isfinite(saved.final_train_loss) || !std::isfinite(saved.final_val_loss)) {
    const auto logged = read_metrics(paths.metrics);  // checkpoints of older versions
    const auto train_loss = logged.train_loss_at(saved.step), val_loss = logged.val_loss_at(saved.step);
    if (!std::isfinite(saved.final_train_loss) && train_loss) saved.final_train_loss = *train_loss;
    if (!std::isfinite(saved.final_val_loss) && val_loss) saved.final_val_loss = *val_loss;
  }
  const auto recorded = RunSummary::from_json(read_run_file(paths.done));  // unreadable: rewritten
  if (recorded.step == saved.step && std::isfinite(recorded.final_train_loss) && std::isfinite(recorded.final_val_loss))
    return {recorded, false};
  return {saved, true};
}

}  // namespace xsagpt
