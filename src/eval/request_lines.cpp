#include "eval/request_lines.h"

#include "config/schema.h"
#include "eval/json_line.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace xsagpt::eval {

LineRequest parse_request_line(const std::string& line, const std::string& where) {
  json j = parse_object_line(line, where);  // not const: operator[] on a missing key reads null
  auto str = [&](const char* key) {
    if (!j[key].is_string())
      throw ConfigError(fmt::format("{}: \"{}\": expected a string, got {}", where, key, schema::show(j[key])));
    return j[key].get<std::string>();
  };
  LineRequest r;
  r.where = where;
  if (j.contains("context") || j.contains("continuation")) {
    if (!j.contains("context") || !j.contains("continuation"))
      throw ConfigError(fmt::format("{}: a request needs both \"context\" and \"continuation\"", where));
    r.kind = LineRequest::kPair;
    r.context = str("context");
    r.continuation = str("continuation");
  } else if (j.contains("text")) {
    r.kind = LineRequest::kRolling;
    r.text = str("text");
  } else if (j.contains("prompt")) {
    r.kind = LineRequest::kGenerate;
    auto& g = r.generate;
    g.prompt = str("prompt");
    if (j.contains("until")) {
      const auto& u = j["until"];
      if (u.is_string())
        g.until = {u.get<std::string>()};
      else if (u.is_array() && std::all_of(u.begin(), u.end(), [](const json& e) { return e.is_string(); }))
        g.until = u.get<std::vector<std::string>>();
      else
        throw ConfigError(
            fmt::format("{}: \"until\": expected a string or a list of strings, got {}", where, schema::show(u)));
    }
    if (j.contains("max_new_tokens")) {
      if (!j["max_new_tokens"].is_number_integer() || j["max_new_tokens"].get<int64_t>() < 1)
        throw ConfigError(fmt::format("{}: \"max_new_tokens\": expected an integer >= 1, got {}", where,
                                      schema::show(j["max_new_tokens"])));
      g.max_new_tokens = j["max_new_tokens"].get<int64_t>();
    }
    if (j.contains("temperature")) {
      if (!j["temperature"].is_number() || !(j["temperature"].get<double>() >= 0) ||
          !std::isfinite(j["temperature"].get<double>()))
        throw ConfigError(fmt::format("{}: \"temperature\": expected 0 (greedy) or a finite number > 0, got {}", where,
                                      schema::show(j["temperature"])));
      g.temperature = j["temperature"].get<double>();
    }
    if (j.contains("seed")) {
      if (!j["seed"].is_number_unsigned())
        throw ConfigError(
            fmt::format("{}: \"seed\": expected an integer >= 0, got {}", where, schema::show(j["seed"])));
      g.seed = j["seed"].get<uint64_t>();
    }
  } else {
    json keys = json::array();
    for (const auto& item : j.items()) keys.push_back(item.key());
    throw ConfigError(
        fmt::format("{}: expected {{\"context\", \"continuation\"}}, {{\"text\"}} or {{\"prompt\", ...}}, "
                    "got the keys {}",
                    where, keys.dump()));
  }
  return r;
}

}  // namespace xsagpt::eval
