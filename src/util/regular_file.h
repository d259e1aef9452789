// Opening the files a run or a sweep keeps its state in (config.json, done.json,
// failed.json, metrics.jsonl, a lock, sweep.json) only when they are regular files.
// Opening a FIFO for reading blocks until a writer comes, so a FIFO left in place of
// done.json would hang `--status` for ever; a device or socket is no state either.
// Whatever stands there that is not a regular file is refused by name instead.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

namespace xsagpt {

// What `path` is when it exists and is no regular file (following links: "a FIFO",
// "a directory", ...); empty when it is a regular file or absent.
std::string not_a_regular_file(const std::filesystem::path& path);

// An input stream on `path`, which is closed (reads nothing) when the file is absent;
// ConfigError naming the file and what it is when it is there but no regular file.
std::ifstream open_state_file(const std::filesystem::path& path, std::ios::openmode mode = std::ios::in);

}  // namespace xsagpt
