// Tasks from local JSON-lines files, for `xsagpt eval`, in the form lm-evaluation-
// harness renders a document (doc_to_text / doc_to_choice / doc_to_target), so a task
// file is what lm-eval would send and the numbers are lm-eval's. One item per line,
// of one of three shapes (all items of a task have the same shape):
//   choice      {"context": str, "endings": [str, ...], "label": int}
//               ARC, BoolQ, HellaSwag, OBQA, PIQA, SIQA: ending k is scored as the
//               continuation target_delimiter + endings[k] of the context;
//   contexts    {"contexts": [str, ...], "continuation": str, "label": int}
//               WinoGrande (partial scoring): the one continuation target_delimiter +
//               continuation is scored after each context; the label picks a context;
//   greedy      {"context": str, "continuation": str}
//               LAMBADA: log p(continuation | context), joined as written (lm-eval adds
//               no delimiter to a loglikelihood task); correct when every continuation
//               token is the model's greedy choice.
// Optional keys: "name" (the task; default: the file's stem) and, for the first two
// shapes, "target_delimiter" (default " ", lm-eval's default). So the context carries
// no trailing space and the endings no leading one, exactly as lm-eval's configs give
// them. A file in the old form (" Paris" with the space in the ending) would be scored
// with two spaces: it is refused, naming the line and how to convert it.
//
// Every problem is a ConfigError naming the file and line: malformed JSON, a missing
// or mistyped key, no endings, an empty ending, a label outside the endings, a space
// on both sides of the delimiter, a task mixing shapes, a file without items.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace xsagpt::eval {

enum class ItemShape { kChoice, kContexts, kGreedy };

const char* shape_name(ItemShape shape);

struct McItem {
  ItemShape shape = ItemShape::kChoice;
  // kChoice: one context, several endings; kContexts: several contexts, one ending
  // (endings[0]); kGreedy: one context, one ending, no delimiter.
  std::vector<std::string> contexts;
  std::vector<std::string> endings;
  std::string delimiter = " ";
  int64_t label = 0;
  std::string where;  // "file:line", for messages

  // The (context, continuation) pairs lm-eval sends for this item, one per choice.
  std::vector<std::pair<std::string, std::string>> requests() const;
  // The strings lm-eval's acc_norm divides by (doc_to_choice: the endings, or the
  // contexts for the partial-scoring shape), without the delimiter.
  const std::vector<std::string>& choices() const { return shape == ItemShape::kContexts ? contexts : endings; }
};

struct McTask {
  std::string name;
  ItemShape shape = ItemShape::kChoice;
  std::vector<McItem> items;
};

// The tasks in `files`, in order of first appearance; `limit` > 0 keeps the first
// `limit` items of each task.
std::vector<McTask> read_task_files(const std::vector<std::filesystem::path>& files, int64_t limit = 0);

}  // namespace xsagpt::eval
