#include "tokenizer/utf8.h"

namespace xsagpt::utf8 {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Appends s, with replacements, to out; returns the bytes consumed: all of s, or
// fewer when hold_back_truncated and s ends in the start of a valid sequence.
size_t append_replaced(std::string_view s, bool hold_back_truncated, std::string& out) {
  size_t i = 0;
  while (i < s.size()) {
    const Sequence q = next_sequence(s, i);
    if (q.kind == Kind::kTruncated && hold_back_truncated) return i;
    if (q.kind == Kind::kValid)
      out.append(s.substr(i, q.len));
    else
      out.append(kReplacement);
    i += q.len;
  }
  return i;
}

}  // namespace

std::string replace_invalid(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  append_replaced(s, false, out);
  return out;
}

std::string StreamDecoder::push(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  pending_.erase(0, append_replaced(pending_, true, out));
  return out;
}

std::string StreamDecoder::finish() {
  std::string out = replace_invalid(pending_);
  pending_.clear();
  return out;
}

}  // namespace xsagpt::utf8
