#include "tokenizer/utf8.h"

namespace xsagpt::utf8 {

namespace {

enum class Kind { kValid, kInvalid, kTruncated };

struct Sequence {
  size_t len;  // bytes of the sequence, or of the maximal ill-formed subpart
  Kind kind;
};

// One sequence starting at s[i], following Table 3-7 (well-formed UTF-8 byte
// sequences) of the Unicode standard: the second byte's range depends on the lead
// byte (this excludes overlong forms, surrogates and code points above U+10FFFF);
// later bytes are plain continuation bytes 80..BF.
Sequence next_sequence(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = b(i);
  if (lead < 0x80) return {1, Kind::kValid};
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF)
    need = 2;
  else if (lead == 0xE0)
    need = 3, lo = 0xA0;
  else if (lead >= 0xE1 && lead <= 0xEC)
    need = 3;
  else if (lead == 0xED)
    need = 3, hi = 0x9F;
  else if (lead >= 0xEE && lead <= 0xEF)
    need = 3;
  else if (lead == 0xF0)
    need = 4, lo = 0x90;
  else if (lead >= 0xF1 && lead <= 0xF3)
    need = 4;
  else if (lead == 0xF4)
    need = 4, hi = 0x8F;
  else
    return {1, Kind::kInvalid};  // 80..C1, F5..FF never start a sequence
  for (size_t k = 1; k < need; ++k) {
    if (i + k >= s.size()) return {k, Kind::kTruncated};
    const unsigned char c = b(i + k);
    if (k == 1 ? (c < lo || c > hi) : (c < 0x80 || c > 0xBF)) return {k, Kind::kInvalid};
  }
  return {need, Kind::kValid};
}

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

size_t first_invalid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const Sequence q = next_sequence(s, i);
    if (q.kind != Kind::kValid) return i;
    i += q.len;
  }
  return s.size();
}

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
