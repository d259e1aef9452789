// UTF-8 well-formedness for the tokenizer. Byte-level BPE can split a character
// across tokens, so decoded token bytes need not be valid UTF-8: invalid parts are
// replaced by U+FFFD one "maximal subpart" at a time (Unicode 15, section 3.9,
// "U+FFFD Substitution of Maximal Subparts"), which is exactly what Python's
// bytes.decode("utf-8", errors="replace") does and so what tiktoken's decode gives.
#pragma once

#include "util/utf8.h"  // well-formedness: first_invalid, escape_invalid

#include <cstddef>
#include <string>
#include <string_view>

namespace xsagpt::utf8 {

// s with every maximal ill-formed subpart replaced by U+FFFD.
std::string replace_invalid(std::string_view s);

// Decodes a byte stream that arrives in pieces (e.g. one token at a time while
// sampling) so that a character split across pieces is printed whole, not as
// U+FFFD. Concatenating push()es and finish() equals replace_invalid(all bytes).
class StreamDecoder {
 public:
  // Text that is final now; an incomplete sequence at the end is held back.
  std::string push(std::string_view bytes);
  // Flushes what is held back (an incomplete sequence becomes U+FFFD).
  std::string finish();

 private:
  std::string pending_;
};

}  // namespace xsagpt::utf8
