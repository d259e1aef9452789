// JSON from outside, read with a nesting limit (see json_read.h).
#include "util/json_read.h"

#include <fmt/format.h>

#include <cctype>

namespace xsagpt {

namespace {

using json = nlohmann::json;

// The nesting limit, and the last object key read, which names the value a later
// error is in.
json::parser_callback_t depth_limited(const std::string& where, const json::parser_callback_t& callback,
                                      std::string& last_key) {
  return [where, callback, &last_key](int depth, json::parse_event_t event, json& parsed) {
    // `depth` counts the arrays and objects around the one that starts here.
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth)
      throw JsonDepthError(
          fmt::format("{}: JSON nested more than {} levels deep (arrays and objects inside each "
                      "other); expected at most {}",
                      where, kMaxJsonDepth, kMaxJsonDepth));
    if (event == json::parse_event_t::key && parsed.is_string()) last_key = parsed.get<std::string>();
    return callback ? callback(depth, event, parsed) : true;
  };
}

// A number no double holds (1e999) is valid JSON text that nlohmann refuses with
// out_of_range and no place: the error names the source and the key it is under.
template <class Input>
json parse_limited(Input&& input, const std::string& where, const json::parser_callback_t& callback,
                   bool ignore_comments) {
  std::string last_key;
  try {
    return json::parse(std::forward<Input>(input), depth_limited(where, callback, last_key),
                       /*allow_exceptions=*/true, ignore_comments);
  } catch (const json::out_of_range& e) {
    throw ConfigError(fmt::format("{}: {}a number out of a double's range ({}); expected a finite number", where,
                                  last_key.empty() ? "" : "the value of \"" + last_key + "\" holds ", e.what()));
  }
}

}  // namespace

json parse_json(const std::string& text, const std::string& where, const json::parser_callback_t& callback,
                bool ignore_comments) {
  return parse_limited(text, where, callback, ignore_comments);
}

json parse_json(std::istream& in, const std::string& where, const json::parser_callback_t& callback,
                bool ignore_comments) {
  return parse_limited(in, where, callback, ignore_comments);
}

json parse_json_or_discarded(const std::string& text) {
  try {
    return parse_json(text, "");
  } catch (const json::parse_error&) {
  } catch (const ConfigError&) {  // too deep, or a number out of range
  }
  return json(json::value_t::discarded);
}

std::optional<int64_t> nonfinite_literal_line(std::string_view text) {
  int64_t line = 1;
  bool in_string = false, escaped = false;
  auto starts = [&](size_t i, std::string_view word) {
    if (text.size() - i < word.size()) return false;
    for (size_t k = 0; k < word.size(); ++k)
      if (std::tolower(static_cast<unsigned char>(text[i + k])) != word[k]) return false;
    return true;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
      continue;
    }
    // A word begins here (nothing alphanumeric before it): NaN, Infinity, and their kin.
    const bool word_start = i == 0 || !std::isalnum(static_cast<unsigned char>(text[i - 1]));
    if (word_start && (starts(i, "nan") || starts(i, "inf"))) return line;
  }
  return std::nullopt;
}

std::string nonfinite_literal_message(const std::string& file, int64_t line) {
  return fmt::format("{}:{}: a non-finite literal (NaN/Infinity) is not valid JSON; the trainer writes null", file,
                     line);
}

}  // namespace xsagpt
