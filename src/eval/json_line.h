// One line of a JSON-lines input (score's requests, eval's task files) read as a
// JSON object, or a ConfigError naming where it is (file:line) and what is wrong.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace xsagpt::eval {

nlohmann::json parse_object_line(const std::string& line, const std::string& where);

}  // namespace xsagpt::eval
