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

// The same, for a file several processes (on one machine or several sharing the
// directory) may write at once, such as a sweep's summary: each writes its own
// temporary, named after its host and pid, so two writes never interleave in one
// temporary; the last rename wins, and a reader sees one whole file or the other.
void write_file_atomic_shared(const std::filesystem::path& path, const std::string& text);

// Creates `path` holding `text` only if no file of that name exists, for any number
// of processes on any number of machines sharing the directory: the text is written
// to a temporary of this process's own and hard-linked to `path`, which fails for all
// but one creator (link(2) is atomic on NFS too, where O_EXCL on old servers is not).
// A reader never sees the file empty or half written. Returns false when `path`
// already existed; throws WriteError naming the file on any other failure.
bool create_file_exclusive(const std::filesystem::path& path, const std::string& text);

// "<path>.<host>.<pid>.<n>.tmp": this call's own temporary beside `path`.
std::filesystem::path private_temporary(const std::filesystem::path& path);

// Makes a rename in `dir` durable (best effort: some file systems refuse it).
void fsync_dir(const std::filesystem::path& dir);

// "path: what: strerror(errno)" for the errno of the call that just failed.
std::string errno_message(const std::filesystem::path& path, const char* what);

}  // namespace xsagpt
