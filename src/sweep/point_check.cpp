// A point's run checked before a sweep continues it or a summary compares it (see point_check.h).
#include "sweep/point_check.h"

#include "config/config_diff.h"
#include "run/run_paths.h"
#include "util/json_read.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>

namespace xsagpt {

namespace fs = std::filesystem;

namespace {

bool finite_number(const json& v) { return v.is_number() && std::isfinite(v.get<double>()); }

bool close_to(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)); }

// The val records a reader of metrics.jsonl ends up with (a step at or below the last
// one marks a restart, whose records replace what followed), and the lines that are
// not JSON objects with a step of 0 or more: a kill's torn line, or an edit (a negative
// step is never the trainer's, and read as a restart it would erase the curve). A line
// with a literal NaN or Infinity is damaged too, but by the rule of util/json_read.h it
// makes the run unusable, as the trainer's null for the same number does, rather than
// being skipped as a torn line is: skipped, it would leave a diverged run compared.
struct ValCurve {
  struct Record {
    int64_t line = 0;
    int64_t step = 0;
    json tokens, loss;
  };
  std::vector<Record> records;
  std::vector<int64_t> damaged;
  std::optional<int64_t> nonfinite;  // the first line with a non-finite literal
};

ValCurve read_val_curve(const fs::path& file) {
  ValCurve c;
  std::ifstream in(file);
  int64_t n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    const json r = parse_json_or_discarded(line);
    if (!r.is_object() || !r.value("step", json()).is_number_integer() || r["step"].get<int64_t>() < 0) {
      if (r.is_discarded() && !c.nonfinite && nonfinite_literal_line(line)) c.nonfinite = n;
      c.damaged.push_back(n);
      continue;
    }
    if (!r.contains("val_loss")) continue;
    const int64_t step = r["step"].get<int64_t>();
    while (!c.records.empty() && c.records.back().step >= step) c.records.pop_back();
    c.records.push_back({n, step, r.value("tokens", json()), r["val_loss"]});
  }
  return c;
}

std::string damaged_note(const ValCurve& c) {
  if (c.damaged.empty()) return "";
  std::string lines;
  for (size_t i = 0; i < c.damaged.size() && i < 5; ++i) lines += (i ? ", " : "") + std::to_string(c.damaged[i]);
  if (c.damaged.size() > 5) lines += ", ...";
  return fmt::format("; {} damaged line(s) skipped: {}", c.damaged.size(), lines);
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
  const auto curve = read_val_curve(run.metrics);
  if (curve.nonfinite) return nonfinite_literal_message(run.metrics.string(), *curve.nonfinite);
  const auto extra = damaged_note(curve);
  for (const auto& r : curve.records)
    if (!finite_number(r.loss))
      return fmt::format("{} line {}: val_loss at step {} is {}, not a finite number{}", metrics_name, r.line, r.step,
                         r.loss.dump(), extra);
  if (curve.records.empty()) return fmt::format("{} holds no val loss{}", metrics_name, extra);
  const auto& last = curve.records.back();
  if (last.step != step.get<int64_t>())
    return fmt::format("{}'s val curve ends at step {}, but {} says the run reached step {}{}", metrics_name, last.step,
                       done_name, step.get<int64_t>(), extra);
  if (!close_to(last.loss.get<double>(), done["final_val_loss"].get<double>()))
    return fmt::format("{}'s val loss at step {} is {}, but {}'s final_val_loss is {}", metrics_name, last.step,
                       last.loss.dump(), done_name, done["final_val_loss"].dump());
  const auto tokens = done.value("tokens", json());
  if (tokens.is_number() && !(last.tokens.is_number() && close_to(last.tokens.get<double>(), tokens.get<double>())))
    return fmt::format("{}'s val record at step {} has tokens {}, but {} says {}", metrics_name, last.step,
                       last.tokens.dump(), done_name, tokens.dump());
  return std::nullopt;
}

std::optional<json> finished_point(const SweepPoint& p) {
  const RunPaths run(p.config.out_dir);
  json e;
  if (const auto foreign = foreign_run(p)) {
    e["status"] = "invalid";  // another run's results are never this point's
    e["error"] = *foreign;
  } else if (fs::exists(run.done)) {
    const auto done = read_run_file(run.done);
    // A finished run is compared only once its files agree.
    const auto unusable = unusable_run(p, done);
    e["status"] = unusable ? "invalid" : "done";
    if (unusable) e["error"] = *unusable;
    for (const char* k : {"final_train_loss", "final_val_loss", "tokens", "wall_s", "step"})
      e[k] = done.is_object() ? done.value(k, json()) : json();
  } else if (const auto failure = point_failure(p)) {
    e["status"] = "failed";
    e["error"] = failure->value("error", json("unknown"));
  } else {
    return std::nullopt;
  }
  return e;
}

}  // namespace xsagpt
