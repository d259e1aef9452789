// UTF-8 well-formedness, for every layer: the tokenizer's decoding (tokenizer/utf8.h)
// and messages that show a name which is not UTF-8. JSON text (config.json, reports,
// checkpoints' configs) must be UTF-8, and nlohmann::json refuses to write anything
// else with a bare "type_error.316"; a path with such bytes is named with them
// escaped as \xNN instead, together with the option or file it came from.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace xsagpt::utf8 {

enum class Kind { kValid, kInvalid, kTruncated };

struct Sequence {
  size_t len;  // bytes of the sequence, or of the maximal ill-formed subpart
  Kind kind;
};

// One sequence starting at s[i], following Table 3-7 (well-formed UTF-8 byte
// sequences) of the Unicode standard: the second byte's range depends on the lead
// byte (this excludes overlong forms, surrogates and code points above U+10FFFF);
// later bytes are plain continuation bytes 80..BF.
Sequence next_sequence(std::string_view s, size_t i);

// Byte offset of the first byte that is not part of a well-formed sequence
// (a truncated sequence at the end counts as ill-formed); s.size() if s is valid.
size_t first_invalid(std::string_view s);

// s with every byte of an ill-formed part written as \xNN (and backslashes as
// they are): valid UTF-8 to show in a message or a JSON report.
std::string escape_invalid(std::string_view s);

}  // namespace xsagpt::utf8
