// done.json: the record that a run reached train.max_steps, with its final losses,
// token count and training time. The sweep summaries and the "already finished"
// message read it. It is written at the end of a run, and again by a later start
// when a kill came between the final checkpoint and done.json (finishing is
// idempotent), so its losses can always be made from that checkpoint. A run resumed
// on another number of ranks says so under "rank_changes" ([{"step", "from", "to"}],
// run/progress_state.h): its losses follow an uninterrupted run's to floating-point
// tolerance from that step on, not bit for bit. The key is absent for other runs.
#pragma once

#include "run/progress_state.h"
#include "run/run_paths.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>

namespace xsagpt {

struct RunSummary {
  int64_t step = 0, tokens = 0;
  double final_train_loss = NAN, final_val_loss = NAN;  // NaN (null in JSON): not known
  double wall_s = 0;
  std::vector<RankChange> rank_changes;
  nlohmann::json to_json() const;
  static RunSummary from_json(const nlohmann::json& j);
};

// Writes done.json (atomically).
void finish_run(const std::filesystem::path& dir, const RunSummary& summary);

// For a run whose newest checkpoint (`saved`, its summary) reached max_steps: what
// done.json records, and whether it has to be written. A done.json of that step with
// both losses stands; otherwise the checkpoint's losses, those a checkpoint of an older
// version lacks taken from metrics.jsonl.
struct FinishedRun {
  RunSummary summary;
  bool record_done = false;
};
FinishedRun finished_run(const RunPaths& paths, RunSummary saved);

}  // namespace xsagpt
