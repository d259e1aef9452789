// Reading JSON that comes from outside (config files, request lines on stdin, token
// id lists, metrics lines) with a nesting limit. nlohmann::json parses without
// recursion but dumps, compares and copies values recursively, so 100,000 nested
// arrays parse fine and then overflow the stack when an error message shows them;
// the limit is enforced while the text is read, before any deep value exists.
#pragma once

#include "util/error.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <string_view>

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

// Non-finite numbers, one rule for every file the program writes and reads back: the
// trainer writes null for a number that is NaN or infinite (nlohmann's dump does), and
// a literal NaN, Infinity or -Infinity (Python's json.dumps writes them) is not JSON,
// so a line holding one is a damaged line, refused by name, never skipped as a torn
// line would be. The Python readers (scripts/view/metrics_record.py) word it the same.
//
// The 1-based line of `text`'s first non-finite literal outside a string (NaN,
// Infinity, -Infinity; nan and inf in any case too); nullopt when it has none.
std::optional<int64_t> nonfinite_literal_line(std::string_view text);
// "<file>:<line>: a non-finite literal (NaN/Infinity) is not valid JSON; the trainer writes null"
std::string nonfinite_literal_message(const std::string& file, int64_t line);

}  // namespace xsagpt
