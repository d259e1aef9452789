// Multiple-choice tasks from local JSON-lines files, for `xsagpt eval`. One item
// per line:
//   {"context": str, "endings": [str, ...], "label": int, "name": str (optional)}
// Each ending is scored as the continuation of the context exactly as written, so
// the space between them belongs at the start of the ending (" Paris"). Items are
// grouped into tasks by "name", or by the file's stem when an item has none; blank
// lines are skipped; other keys are ignored (a dataset's "id", say).
//
// Every problem is a ConfigError naming the file and line: malformed JSON, a
// missing or mistyped key, no endings, an empty ending, a label outside the
// endings, a file without items.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace xsagpt::eval {

struct McItem {
  std::string context;
  std::vector<std::string> endings;
  int64_t label = 0;
  std::string where;  // "file:line", for messages
};

struct McTask {
  std::string name;
  std::vector<McItem> items;
};

// The tasks in `files`, in order of first appearance; `limit` > 0 keeps the first
// `limit` items of each task.
std::vector<McTask> read_task_files(const std::vector<std::filesystem::path>& files, int64_t limit = 0);

}  // namespace xsagpt::eval
