// metrics.jsonl parsed once into records, and the views every reader takes (see
// metrics_history.h).
#include "run/metrics_history.h"

#include "run/metrics.h"
#include "util/atomic_file.h"
#include "util/json_read.h"
#include "util/regular_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <iterator>

namespace xsagpt {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// A line's record, if it is one (see the header's rule).
std::optional<MetricsRecord> as_record(const std::string& text, int64_t line, bool whole) {
  json r = parse_json_or_discarded(text);
  if (!r.is_object() || !r.value("step", json()).is_number_integer() || r["step"].get<int64_t>() < 0)
    return std::nullopt;
  const int64_t step = r["step"].get<int64_t>();
  return MetricsRecord{line, step, std::move(r), text, whole};
}

std::optional<double> last_at(const std::vector<MetricsRecord>& records, int64_t step, const char* key) {
  std::optional<double> out;
  for (const auto& r : records)
    if (r.step == step)
      if (const auto v = r.number(key)) out = v;
  return out;
}

}  // namespace

std::optional<double> MetricsRecord::number(const char* key) const {
  const auto v = fields.value(key, json());
  return v.is_number() ? std::optional<double>(v.get<double>()) : std::nullopt;
}

MetricsHistory read_metrics(const fs::path& path) {
  MetricsHistory h;
  auto in = open_state_file(path, std::ios::binary);
  if (!in.is_open()) return h;
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) throw MetricsError(errno_message(path, "cannot read"));
  int64_t number = 0;
  for (size_t start = 0; start < text.size();) {
    const size_t end = text.find('\n', start);
    const bool whole = end != std::string::npos;
    const std::string line = text.substr(start, (whole ? end : text.size()) - start);
    start = whole ? end + 1 : text.size();
    ++number;
    if (auto r = as_record(line, number, whole)) {
      h.records.push_back(std::move(*r));
      continue;
    }
    if (!h.nonfinite && nonfinite_literal_line(line)) h.nonfinite = number;
    h.damaged.push_back(number);
    h.damaged_text += line + "\n";
  }
  return h;
}

std::vector<MetricsRecord> MetricsHistory::val_curve() const {
  std::vector<MetricsRecord> out;
  for (const auto& r : records) {
    if (!r.is_val()) continue;
    while (!out.empty() && out.back().step >= r.step) out.pop_back();
    out.push_back(r);
  }
  return out;
}

std::optional<double> MetricsHistory::median_step_time() const {
  // Every record with a time marks where training stood; an evaluation's is written once it
  // has finished, so an interval from it to the next train record holds training alone.
  // That also gives a run shorter than its log interval one interval: from the evaluation
  // at step 0 to the train record at its end.
  struct Mark {
    int64_t step;
    double time_s;
    bool train;
  };
  std::vector<Mark> marks;
  for (const auto& r : records) {
    const auto time_s = r.number("time_s");
    if (!time_s) continue;
    const bool train = r.is_train();
    while (!marks.empty() && (marks.back().step > r.step || (train && marks.back().step >= r.step))) marks.pop_back();
    marks.push_back({r.step, *time_s, train});
  }
  std::vector<double> per_step;
  for (size_t i = 1; i < marks.size(); ++i) {
    if (!marks[i].train) continue;
    const double steps = static_cast<double>(marks[i].step - marks[i - 1].step);
    const double seconds = marks[i].time_s - marks[i - 1].time_s;
    if (steps > 0 && seconds > 0) per_step.push_back(seconds / steps);
  }
  if (per_step.empty()) return std::nullopt;
  const size_t mid = per_step.size() / 2;
  std::nth_element(per_step.begin(), per_step.begin() + static_cast<std::ptrdiff_t>(mid), per_step.end());
  const double upper = per_step[mid];
  if (per_step.size() % 2 == 1) return upper;
  const double lower = *std::max_element(per_step.begin(), per_step.begin() + static_cast<std::ptrdiff_t>(mid));
  return 0.5 * (lower + upper);
}

std::optional<double> MetricsHistory::train_loss_at(int64_t step) const { return last_at(records, step, "train_loss"); }
std::optional<double> MetricsHistory::val_loss_at(int64_t step) const { return last_at(records, step, "val_loss"); }

std::optional<int64_t> last_logged_step(const fs::path& path) {
  auto in = open_state_file(path, std::ios::binary | std::ios::ate);
  if (!in) return std::nullopt;
  const auto size = static_cast<int64_t>(in.tellg());
  const int64_t from = std::max<int64_t>(0, size - 64 * 1024);
  in.seekg(from);
  std::string tail(static_cast<size_t>(size - from), '\0');
  in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  std::optional<int64_t> step;
  size_t start = 0;
  for (size_t end; (end = tail.find('\n', start)) != std::string::npos; start = end + 1)
    if (const auto r = as_record(tail.substr(start, end - start), 0, true)) step = r->step;
  return step;
}

MetricsCut truncate_metrics(const fs::path& path, int64_t step) {
  MetricsCut cut;
  if (!fs::exists(path)) return cut;
  const auto history = read_metrics(path);
  cut.damaged_lines = history.damaged;
  cut.damaged = history.damaged_text;
  std::string kept;
  for (const auto& r : history.records) {
    if (!r.whole) {  // the last line, cut off mid-write: the resumed run appends after it
      cut.damaged_lines.push_back(r.line);
      cut.damaged += r.text + "\n";
    } else if (r.step <= step) {
      kept += r.text + "\n";
      cut.last_step = std::max(cut.last_step, r.step);
    }
  }
  try {
    write_file_atomic(path, kept);
  } catch (const WriteError& e) {
    throw MetricsError(std::string(e.what()) + " (while dropping the lines past step " + std::to_string(step) + ")");
  }
  return cut;
}

std::string line_ranges(const std::vector<int64_t>& lines) {
  std::string out;
  for (size_t i = 0; i < lines.size();) {
    size_t j = i;
    while (j + 1 < lines.size() && lines[j + 1] == lines[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") + (j == i ? std::to_string(lines[i]) : fmt::format("{}-{}", lines[i], lines[j]));
    i = j + 1;
  }
  return out;
}

}  // namespace xsagpt
