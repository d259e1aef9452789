// A point's run checked before a sweep continues it or a summary compares it (see point_check.h).
#include "sweep/point_check.h"

#include "config/config_diff.h"
#include "run/metrics_history.h"
#include "run/run_paths.h"
#include "sweep/text_table.h"
#include "util/json_read.h"

#include <fmt/format.h>

#include <cmath>

namespace xsagpt {

namespace fs = std::filesystem;

namespace {

bool finite_number(const json& v) { return v.is_number() && std::isfinite(v.get<double>()); }

bool close_to(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)); }

// A damaged line (run/metrics_history.h) is skipped, but said beside whatever else is wrong.
std::string damaged_note(const MetricsHistory& h) {
  if (h.damaged.empty()) return "";
  std::string lines;
  for (size_t i = 0; i < h.damaged.size() && i < 5; ++i) lines += (i ? ", " : "") + std::to_string(h.damaged[i]);
  if (h.damaged.size() > 5) lines += ", ...";
  return fmt::format("; {} damaged line(s) skipped: {}", h.damaged.size(), lines);
}

}  // namespace

std::optional<std::string> foreign_run(const SweepPoint& p) {
  const RunPaths run(p.config.out_dir);
  if (!fs::exists(run.config)) return std::nullopt;
  std::optional<std::string> diff;
  try {
    diff = config_difference(read_json_file(run.config), to_json(p.config));
  } catch (const std::exception& e) {
    return fmt::format("its directory holds an unreadable config.json ({})", e.what());
  }
  if (!diff) return std::nullopt;
  return fmt::format("its directory holds a run of another config than this point's ({}: {})", run.config.string(),
                     *diff);
}

std::optional<std::string> unusable_run(const SweepPoint& p, const json& done) {
  if (auto foreign = foreign_run(p)) return foreign;
  const RunPaths run(p.config.out_dir);
  const std::string done_name = run.done.filename().string(), metrics_name = run.metrics.filename().string();
  if (!done.is_object()) {
    // Why, in read_json_file's words where it refuses the file (a non-finite literal among them).
    try {
      (void)read_json_file(run.done);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return done_name + " is not a JSON object";
  }
  const auto step = done.value("step", json());
  if (!step.is_number_integer()) return fmt::format("{}'s step is {}, not an integer", done_name, step.dump());
  if (step.get<int64_t>() != p.config.train.max_steps)
    return fmt::format("it stopped at step {} of train.max_steps {} ({})", step.get<int64_t>(),
                       p.config.train.max_steps, done_name);
  for (const char* k : {"final_train_loss", "final_val_loss"})
    if (!finite_number(done.value(k, json())))
      return fmt::format("{}'s {} is {}, not a finite number", done_name, k, done.value(k, json()).dump());
  if (!fs::is_regular_file(run.metrics)) return fmt::format("it has no {} (its curves are gone)", metrics_name);
  const auto history = read_metrics(run.metrics);
  if (history.nonfinite) return nonfinite_literal_message(run.metrics.string(), *history.nonfinite);
  const auto extra = damaged_note(history);
  const auto curve = history.val_curve();
  for (const auto& r : curve)
    if (!finite_number(r.fields.at("val_loss")))
      return fmt::format("{} line {}: val_loss at step {} is {}, not a finite number{}", metrics_name, r.line, r.step,
                         r.fields.at("val_loss").dump(), extra);
  if (curve.empty()) return fmt::format("{} holds no val loss{}", metrics_name, extra);
  const auto& last = curve.back();
  const auto last_loss = last.fields.at("val_loss"), last_tokens = last.fields.value("tokens", json());
  if (last.step != step.get<int64_t>())
    return fmt::format("{}'s val curve ends at step {}, but {} says the run reached step {}{}", metrics_name, last.step,
                       done_name, step.get<int64_t>(), extra);
  if (!close_to(last_loss.get<double>(), done["final_val_loss"].get<double>()))
    return fmt::format("{}'s val loss at step {} is {}, but {}'s final_val_loss is {}", metrics_name, last.step,
                       last_loss.dump(), done_name, done["final_val_loss"].dump());
  const auto tokens = done.value("tokens", json());
  if (tokens.is_number() && !(last_tokens.is_number() && close_to(last_tokens.get<double>(), tokens.get<double>())))
    return fmt::format("{}'s val record at step {} has tokens {}, but {} says {}", metrics_name, last.step,
                       last_tokens.dump(), done_name, tokens.dump());
  return std::nullopt;
}

const char* status_name(PointStatus s) {
  switch (s) {
    case PointStatus::kDone: return "done";
    case PointStatus::kRunning: return "running";
    case PointStatus::kPending: return "pending";
    case PointStatus::kFailed: return "failed";
    case PointStatus::kInvalid: return "invalid";
  }
  return "pending";
}

std::optional<PointState> ended_state(const SweepPoint& p) {
  const RunPaths run(p.config.out_dir);
  PointState st;
  if (const auto foreign = foreign_run(p)) {
    st.status = PointStatus::kInvalid;  // another run's results are never this point's
    st.detail = *foreign;
    st.record["error"] = *foreign;
  } else if (fs::exists(run.done)) {
    const auto done = read_run_file(run.done);
    for (const char* k : {"final_train_loss", "final_val_loss", "tokens", "wall_s", "step"})
      st.record[k] = done.is_object() ? done.value(k, json()) : json();
    // A finished run is compared only once its files agree.
    if (const auto unusable = unusable_run(p, done)) {
      st.status = PointStatus::kInvalid;
      st.detail = *unusable;
      st.record["error"] = *unusable;
    } else {
      st.status = PointStatus::kDone;
      st.detail = "final val loss " + bounded_fixed(done["final_val_loss"].get<double>(), 4);
    }
  } else if (const auto failure = point_failure(p)) {
    const auto error = failure->value("error", json("unknown"));
    st.status = PointStatus::kFailed;
    st.detail = error.is_string() ? error.get<std::string>() : error.dump();
    st.record["error"] = error;
  } else {
    return std::nullopt;
  }
  return st;
}

}  // namespace xsagpt
