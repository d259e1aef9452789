#include "eval/task_file.h"

#include "config/schema.h"
#include "eval/json_line.h"
#include "eval/request_split.h"

#include <fmt/format.h>

#include <fstream>
#include <map>

namespace xsagpt::eval {

namespace fs = std::filesystem;

const char* shape_name(ItemShape shape) {
  switch (shape) {
    case ItemShape::kChoice: return "{\"context\", \"endings\", \"label\"} (multiple choice)";
    case ItemShape::kContexts: return "{\"contexts\", \"continuation\", \"label\"} (partial scoring)";
    case ItemShape::kGreedy: return "{\"context\", \"continuation\"} (greedy loglikelihood)";
  }
  return "?";
}

std::vector<std::pair<std::string, std::string>> McItem::requests() const {
  std::vector<std::pair<std::string, std::string>> out;
  if (shape == ItemShape::kContexts) {
    for (const auto& c : contexts) out.emplace_back(c, delimiter + endings[0]);
  } else {
    for (const auto& e : endings) out.emplace_back(contexts[0], delimiter + e);
  }
  return out;
}

namespace {

bool ends_with_space(std::string_view s) { return !s.empty() && trailing_space_start(s) < s.size(); }

bool starts_with_space(std::string_view s) {
  if (s.empty()) return false;
  size_t len = 1;  // the first code point's bytes
  while (len < s.size() && (static_cast<unsigned char>(s[len]) & 0xC0) == 0x80) ++len;
  return trailing_space_start(s.substr(0, len)) == 0;
}

const char* const kShapes =
    "an item is {\"context\": str, \"endings\": [str, ...], \"label\": int}, "
    "{\"contexts\": [str, ...], \"continuation\": str, \"label\": int} or {\"context\": str, \"continuation\": str}";

McItem parse_item(const std::string& line, const std::string& where, std::string& name) {
  json j = parse_object_line(line, where);  // not const: operator[] on a missing key reads null
  auto need = [&](const char* key) -> const json& {
    if (!j.contains(key)) throw ConfigError(fmt::format("{}: missing key \"{}\" ({})", where, key, kShapes));
    return j[key];
  };
  auto string_of = [&](const char* key) {
    const auto& v = need(key);
    if (!v.is_string())
      throw ConfigError(fmt::format("{}: \"{}\": expected a string, got {}", where, key, schema::show(v)));
    return v.get<std::string>();
  };
  auto strings_of = [&](const char* key, const char* what) {
    const auto& v = need(key);
    if (!v.is_array())
      throw ConfigError(fmt::format("{}: \"{}\": expected a list of strings, got {}", where, key, schema::show(v)));
    if (v.empty()) throw ConfigError(fmt::format("{}: \"{}\" is empty; an item needs at least one", where, key));
    std::vector<std::string> out;
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string())
        throw ConfigError(fmt::format("{}: \"{}\"[{}]: expected a string, got {}", where, key, i, schema::show(v[i])));
      if (v[i].get_ref<const std::string&>().empty())
        throw ConfigError(fmt::format("{}: \"{}\"[{}] is empty; {} needs at least one character", where, key, i, what));
      out.push_back(v[i].get<std::string>());
    }
    return out;
  };

  McItem item;
  item.where = where;
  if (j.contains("endings")) {
    item.shape = ItemShape::kChoice;
    item.contexts = {string_of("context")};
    item.endings = strings_of("endings", "an ending");
  } else if (j.contains("contexts")) {
    item.shape = ItemShape::kContexts;
    item.contexts = strings_of("contexts", "a context");
    item.endings = {string_of("continuation")};
  } else if (j.contains("continuation")) {
    item.shape = ItemShape::kGreedy;
    item.contexts = {string_of("context")};
    item.endings = {string_of("continuation")};
    item.delimiter.clear();
  } else {
    need("endings");
  }

  if (item.shape != ItemShape::kGreedy) {
    const auto& label = need("label");
    const auto n = item.choices().size();
    if (!label.is_number_integer())
      throw ConfigError(fmt::format("{}: \"label\": expected an integer index into \"{}\", got {}", where,
                                    item.shape == ItemShape::kChoice ? "endings" : "contexts", schema::show(label)));
    item.label = label.get<int64_t>();
    if (item.label < 0 || item.label >= static_cast<int64_t>(n))
      throw ConfigError(fmt::format("{}: \"label\" {} is out of range for {} {} (0..{})", where, item.label, n,
                                    item.shape == ItemShape::kChoice ? "endings" : "contexts", n - 1));
    if (j.contains("target_delimiter")) item.delimiter = string_of("target_delimiter");
  } else if (j.contains("target_delimiter") || j.contains("label")) {
    throw ConfigError(
        fmt::format("{}: a {{\"context\", \"continuation\"}} item is scored as written, with no "
                    "\"target_delimiter\" or \"label\" (lm-eval's loglikelihood tasks add no delimiter; "
                    "put any space at the start of the continuation, as lambada_openai does)",
                    where));
  }

  // Two whitespace characters where lm-eval's rendering has one: an old-form file.
  if (!item.delimiter.empty()) {
    const auto delim = json(item.delimiter).dump();
    for (size_t k = 0; k < item.endings.size(); ++k)
      if (ends_with_space(item.delimiter) && starts_with_space(item.endings[k]))
        throw ConfigError(fmt::format(
            "{}: \"{}\"{} starts with whitespace and target_delimiter {} adds more: two spaces would be scored. "
            "This is the old task-file form; convert it by removing the leading space from every ending "
            "(lm-eval's doc_to_choice gives them without it), or keep the spaces and set \"target_delimiter\": \"\"",
            where, item.shape == ItemShape::kChoice ? "endings" : "continuation",
            item.shape == ItemShape::kChoice ? fmt::format("[{}]", k) : "", delim));
    for (size_t k = 0; k < item.contexts.size(); ++k)
      if (starts_with_space(item.delimiter) && ends_with_space(item.contexts[k]))
        throw ConfigError(fmt::format(
            "{}: \"{}\"{} ends with whitespace and target_delimiter {} adds more: two spaces would be scored. "
            "This is the old task-file form; convert it by removing the trailing space from the context "
            "(lm-eval's doc_to_text gives it without), or set \"target_delimiter\": \"\"",
            where, item.shape == ItemShape::kChoice ? "context" : "contexts",
            item.shape == ItemShape::kChoice ? "" : fmt::format("[{}]", k), delim));
  }

  if (j.contains("name")) {
    if (!j["name"].is_string() || j["name"].get_ref<const std::string&>().empty())
      throw ConfigError(
          fmt::format("{}: \"name\": expected a non-empty string, got {}", where, schema::show(j["name"])));
    name = j["name"].get<std::string>();
  }
  return item;
}

}  // namespace

std::vector<McTask> read_task_files(const std::vector<fs::path>& files, int64_t limit) {
  std::vector<McTask> tasks;
  std::map<std::string, size_t> index;
  std::map<std::string, std::string> first_where;
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw ConfigError(file.string() + ": cannot open task file");
    std::string line;
    size_t line_no = 0, items = 0;
    while (std::getline(in, line)) {
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      std::string name = file.stem().string();
      auto item = parse_item(line, fmt::format("{}:{}", file.string(), line_no), name);
      ++items;
      auto [it, fresh] = index.try_emplace(name, tasks.size());
      if (fresh) {
        tasks.push_back({name, item.shape, {}});
        first_where[name] = item.where;
      }
      auto& task = tasks[it->second];
      if (item.shape != task.shape)
        throw ConfigError(
            fmt::format("{}: an item of shape {} in task \"{}\", whose first item ({}) is {}; one task "
                        "holds one shape",
                        item.where, shape_name(item.shape), name, first_where[name], shape_name(task.shape)));
      if (limit <= 0 || static_cast<int64_t>(task.items.size()) < limit) task.items.push_back(std::move(item));
    }
    if (items == 0) throw ConfigError(file.string() + ": no items (expected one JSON object per line)");
  }
  return tasks;
}

}  // namespace xsagpt::eval
