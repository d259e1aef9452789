// JSON from outside, read with a nesting limit (see json_read.h).
#include "util/json_read.h"

#include <fmt/format.h>

namespace xsagpt {

namespace {

using json = nlohmann::json;

json::parser_callback_t depth_limited(const std::string& where, const json::parser_callback_t& callback) {
  return [where, callback](int depth, json::parse_event_t event, json& parsed) {
    // `depth` counts the arrays and objects around the one that starts here.
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth)
      throw JsonDepthError(
          fmt::format("{}: JSON nested more than {} levels deep (arrays and objects inside each "
                      "other); expected at most {}",
                      where, kMaxJsonDepth, kMaxJsonDepth));
    return callback ? callback(depth, event, parsed) : true;
  };
}

}  // namespace

json parse_json(const std::string& text, const std::string& where, const json::parser_callback_t& callback,
                bool ignore_comments) {
  return json::parse(text, depth_limited(where, callback), /*allow_exceptions=*/true, ignore_comments);
}

json parse_json(std::istream& in, const std::string& where, const json::parser_callback_t& callback,
                bool ignore_comments) {
  return json::parse(in, depth_limited(where, callback), /*allow_exceptions=*/true, ignore_comments);
}

json parse_json_or_discarded(const std::string& text) {
  try {
    return parse_json(text, "");
  } catch (const json::parse_error&) {
  } catch (const JsonDepthError&) {}
  return json(json::value_t::discarded);
}

}  // namespace xsagpt
