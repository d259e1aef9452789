// Whole-file writes that never leave a half-written file where a good one was:
// the text goes to `<path>.tmp`, is flushed to disk (fsync), and only then renamed
// over `path`; on any failure the temporary file is removed and the error names
// the file and the cause (e.g. "No space left on device"). Used for config.json,
// done.json, summaries and the rewritten metrics history.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>

namespace xsagpt {

struct WriteError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void write_file_atomic(const std::filesystem::path& path, const std::string& text);

// Makes a rename in `dir` durable (best effort: some file systems refuse it).
void fsync_dir(const std::filesystem::path& dir);

// "path: what: strerror(errno)" for the errno of the call that just failed.
std::string errno_message(const std::filesystem::path& path, const char* what);

}  // namespace xsagpt
