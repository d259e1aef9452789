#include "eval/json_line.h"

#include "config/schema.h"
#include "util/json_read.h"

#include <fmt/format.h>

namespace xsagpt::eval {

nlohmann::json parse_object_line(const std::string& line, const std::string& where) {
  nlohmann::json j;
  try {
    j = parse_json(line, where);
  } catch (const nlohmann::json::parse_error& e) {
    throw ConfigError(fmt::format("{}: malformed JSON: {}", where, e.what()));
  }
  if (!j.is_object()) throw ConfigError(fmt::format("{}: expected a JSON object, got {}", where, schema::show(j)));
  return j;
}

}  // namespace xsagpt::eval
