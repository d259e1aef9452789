// metrics.jsonl read back: the one parser of the lines run/metrics.h writes, and the
// resume's atomic cut of them. Every reader (the resume's cut, done.json's losses of older checkpoints, a point's check, the
// summary's curves, the step time, --status) takes its view of one MetricsHistory, so
// that what counts as a damaged line, a restart and a non-finite number is decided here
// and nowhere else.
//
// - A record is a line that is a JSON object with an integer step of 0 or more. Any other
//   line is damaged: a kill's torn line, garbage, an edit (a negative step is never the
//   trainer's, and read as a restart it would erase a curve).
// - A line with a literal NaN or Infinity is damaged too, and its number is kept apart:
//   by util/json_read.h's rule it makes a run unusable, as the trainer's null does, where
//   a torn line is only skipped (skipped, it would leave a diverged run compared).
// - A restart: a resumed run appends after what it cut, so a record at or below the last
//   step of its kind (val records, train records) replaces those it repeats. A train
//   record also drops any record past its step.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace xsagpt {

struct MetricsRecord {
  int64_t line = 0;  // 1-based line number in the file
  int64_t step = 0;
  nlohmann::json fields;
  std::string text;   // the line as written, for the resume's rewrite
  bool whole = true;  // ended by a newline (the last line of a killed write may not be)

  bool is_val() const { return fields.contains("val_loss"); }
  bool is_train() const { return !is_val() && fields.value("train_loss", nlohmann::json()).is_number(); }
  std::optional<double> number(const char* key) const;  // the field when it is a number
};

struct MetricsHistory {
  std::vector<MetricsRecord> records;  // in file order, restarts included
  std::vector<int64_t> damaged;        // line numbers of the damaged lines
  std::string damaged_text;            // those lines byte for byte, each ended by a newline
  std::optional<int64_t> nonfinite;    // the first line with a non-finite literal

  // The val records as the run ended with them, after its restarts.
  std::vector<MetricsRecord> val_curve() const;
  // Seconds per optimizer step: the median, over each train record and the record before
  // it (a train record, or an evaluation's, written once the evaluation has finished), of
  // the seconds between them over the steps between them. The median, not the first-to-last
  // average, because the first steps carry start-up and an interval holding an evaluation or
  // a checkpoint is longer than its steps: neither moves a median of many intervals. An
  // interval whose time does not grow (a clock restarted with the run) is not counted.
  // Empty without a train record a step or more after an earlier record.
  std::optional<double> median_step_time() const;
  // The last train_loss and val_loss logged at exactly `step`.
  std::optional<double> train_loss_at(int64_t step) const;
  std::optional<double> val_loss_at(int64_t step) const;
};

// Empty when the file is absent; ConfigError when something other than a regular file
// stands there (util/regular_file.h); MetricsError (run/metrics.h) when it cannot be read.
MetricsHistory read_metrics(const std::filesystem::path& path);

// Keeps the lines of steps <= `step`, rewriting the file atomically; nothing happens
// without a file. A damaged line (a line cut off by a kill, garbage, NUL bytes:
// anything that is not a JSON object with an integer "step") is not kept, and is
// returned byte for byte with its line number, for the caller to keep and report.
// MetricsError (run/metrics.h) when the file cannot be read or rewritten.
struct MetricsCut {
  std::vector<int64_t> damaged_lines;  // 1-based line numbers in the file as it was
  std::string damaged;                 // those lines, each ended by a newline
  int64_t last_step = -1;              // the largest step of a kept line; -1: none kept
};
MetricsCut truncate_metrics(const std::filesystem::path& path, int64_t step);

// The step of the last whole record, read from the file's last 64 KiB only, for --status
// on long histories; by the same record rule as read_metrics.
std::optional<int64_t> last_logged_step(const std::filesystem::path& path);

// "3, 7-9, 12": line numbers for messages.
std::string line_ranges(const std::vector<int64_t>& lines);

}  // namespace xsagpt
