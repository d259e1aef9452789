// UTF-8 well-formedness (see utf8.h).
#include "util/utf8.h"

#include <fmt/format.h>

namespace xsagpt::utf8 {

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

size_t first_invalid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const Sequence q = next_sequence(s, i);
    if (q.kind != Kind::kValid) return i;
    i += q.len;
  }
  return s.size();
}

std::string escape_invalid(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const Sequence q = next_sequence(s, i);
    if (q.kind == Kind::kValid)
      out.append(s.substr(i, q.len));
    else
      for (size_t k = 0; k < q.len; ++k) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(s[i + k]));
    i += q.len;
  }
  return out;
}

}  // namespace xsagpt::utf8
