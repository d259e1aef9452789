// Reading JSON that comes from outside (config files, request lines on stdin, token
// id lists, metrics lines) with a nesting limit. nlohmann::json parses without
// recursion but dumps, compares and copies values recursively, so 100,000 nested
// arrays parse fine and then overflow the stack when an error message shows them;
// the limit is enforced while the text is read, before any deep value exists.
#pragma once

#include "util/error.h"

#include <nlohmann/json.hpp>

#include <istream>
#include <string>

namespace xsagpt {

// Arrays and objects may nest this deep; no config, request or log line comes near.
inline constexpr int kMaxJsonDepth = 64;

struct JsonDepthError : ConfigError {
  using ConfigError::ConfigError;
};

// json::parse with the nesting limit: JsonDepthError names `where`. A number out of
// a double's range throws ConfigError naming `where` and the key it is under. Syntax
// errors throw json::parse_error as json::parse does, so callers keep their own messages.
// `callback`, when given, sees every parse event too (and may throw).
nlohmann::json parse_json(const std::string& text, const std::string& where,
                          const nlohmann::json::parser_callback_t& callback = nullptr, bool ignore_comments = false);
nlohmann::json parse_json(std::istream& in, const std::string& where,
                          const nlohmann::json::parser_callback_t& callback = nullptr, bool ignore_comments = false);

// For text that may be anything (a damaged log line): its value, or a discarded
// value when it is not JSON or nests deeper than the limit.
nlohmann::json parse_json_or_discarded(const std::string& text);

}  // namespace xsagpt
