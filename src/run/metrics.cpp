// metrics.jsonl writing and its atomic rewrite on resume (see metrics.h).
#include "run/metrics.h"

#include "util/atomic_file.h"
#include "util/json_read.h"
#include "util/regular_file.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <fstream>
#include <utility>

namespace xsagpt {

namespace fs = std::filesystem;

MetricsLog::MetricsLog(const fs::path& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw MetricsError(errno_message(path, "cannot open for appending"));
}

MetricsLog::MetricsLog(MetricsLog&& o) noexcept { *this = std::move(o); }

MetricsLog& MetricsLog::operator=(MetricsLog&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    path_ = std::move(o.path_);
  }
  return *this;
}

MetricsLog::~MetricsLog() {
  if (fd_ >= 0) ::close(fd_);
}

void MetricsLog::write(const nlohmann::json& line) {
  if (fd_ < 0) return;
  const std::string text = line.dump() + "\n";
  struct stat st {};
  const off_t before = ::fstat(fd_, &st) == 0 ? st.st_size : -1;
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = ENOSPC;
      std::string why = errno_message(path_, "cannot write");
      if (before >= 0 && done > 0) (void)::ftruncate(fd_, before);  // no half line left behind
      throw MetricsError(why + fmt::format("; the run stops at step {} (its lines up to here and its "
                                           "checkpoints are intact: free space, then --resume auto)",
                                           line.value("step", int64_t{-1})));
    }
    done += static_cast<size_t>(n);
  }
}

MetricsCut truncate_metrics(const fs::path& path, int64_t step) {
  MetricsCut cut;
  if (!fs::exists(path)) return cut;
  auto in = open_state_file(path, std::ios::binary);
  if (!in) throw MetricsError(errno_message(path, "cannot open for reading"));
  std::string kept;
  int64_t number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    const bool whole = !in.eof();  // the last line had no newline: cut off mid-write
    const auto j = parse_json_or_discarded(line);
    const bool readable = whole && j.is_object() && j.contains("step") && j["step"].is_number_integer();
    if (!readable) {
      cut.damaged_lines.push_back(number);
      cut.damaged += line + "\n";
    } else if (const auto s = j["step"].get<int64_t>(); s <= step) {
      kept += line + "\n";
      cut.last_step = std::max(cut.last_step, s);
    }
  }
  if (in.bad()) throw MetricsError(errno_message(path, "cannot read"));
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

LoggedLosses losses_at_step(const fs::path& path, int64_t step) {
  LoggedLosses out;
  auto in = open_state_file(path);
  for (std::string line; std::getline(in, line);) {
    const auto j = parse_json_or_discarded(line);
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer() || j["step"].get<int64_t>() != step)
      continue;
    if (j.contains("train_loss") && j["train_loss"].is_number()) out.train_loss = j["train_loss"].get<double>();
    if (j.contains("val_loss") && j["val_loss"].is_number()) out.val_loss = j["val_loss"].get<double>();
  }
  return out;
}

}  // namespace xsagpt
