#include "eval/task_file.h"

#include "config/schema.h"
#include "eval/json_line.h"

#include <fmt/format.h>

#include <fstream>
#include <map>

namespace xsagpt::eval {

namespace fs = std::filesystem;

static McItem parse_item(const std::string& line, const std::string& where, std::string& name) {
  json j = parse_object_line(line, where);  // not const: operator[] on a missing key reads null
  auto need = [&](const char* key) -> const json& {
    if (!j.contains(key))
      throw ConfigError(fmt::format("{}: missing key \"{}\" (an item is {{\"context\": str, \"endings\": [str, ...], "
                                    "\"label\": int}})", where, key));
    return j[key];
  };
  McItem item;
  item.where = where;
  const auto& ctx = need("context");
  if (!ctx.is_string()) throw ConfigError(fmt::format("{}: \"context\": expected a string, got {}", where, schema::show(ctx)));
  item.context = ctx.get<std::string>();
  const auto& endings = need("endings");
  if (!endings.is_array())
    throw ConfigError(fmt::format("{}: \"endings\": expected a list of strings, got {}", where, schema::show(endings)));
  if (endings.empty()) throw ConfigError(fmt::format("{}: \"endings\" is empty; an item needs at least one", where));
  for (size_t i = 0; i < endings.size(); ++i) {
    if (!endings[i].is_string())
      throw ConfigError(fmt::format("{}: \"endings\"[{}]: expected a string, got {}", where, i, schema::show(endings[i])));
    if (endings[i].get_ref<const std::string&>().empty())
      throw ConfigError(fmt::format("{}: \"endings\"[{}] is empty; an ending needs at least one character", where, i));
    item.endings.push_back(endings[i].get<std::string>());
  }
  const auto& label = need("label");
  if (!label.is_number_integer())
    throw ConfigError(fmt::format("{}: \"label\": expected an integer index into \"endings\", got {}", where,
                                  schema::show(label)));
  item.label = label.get<int64_t>();
  if (item.label < 0 || item.label >= static_cast<int64_t>(item.endings.size()))
    throw ConfigError(fmt::format("{}: \"label\" {} is out of range for {} endings (0..{})", where, item.label,
                                  item.endings.size(), item.endings.size() - 1));
  if (j.contains("name")) {
    if (!j["name"].is_string() || j["name"].get_ref<const std::string&>().empty())
      throw ConfigError(fmt::format("{}: \"name\": expected a non-empty string, got {}", where, schema::show(j["name"])));
    name = j["name"].get<std::string>();
  }
  return item;
}

std::vector<McTask> read_task_files(const std::vector<fs::path>& files, int64_t limit) {
  std::vector<McTask> tasks;
  std::map<std::string, size_t> index;
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
      if (fresh) tasks.push_back({name, {}});
      auto& task = tasks[it->second];
      if (limit <= 0 || static_cast<int64_t>(task.items.size()) < limit) task.items.push_back(std::move(item));
    }
    if (items == 0) throw ConfigError(file.string() + ": no items (expected one JSON object per line)");
  }
  return tasks;
}

}  // namespace xsagpt::eval
