// The JSON-lines protocol of `xsagpt score`. Each input line is one request, its
// kind given by its keys:
//   {"context": str, "continuation": str}   log p(continuation | context)
//   {"text": str}                           log p(text), whole (rolling windows)
//   {"prompt": str, "until": [str], "max_new_tokens": int, "temperature": float,
//    "seed": int}                           generated text (all but "prompt" optional;
//                                           max_new_tokens 1..block_size, default min(256, block_size))
// and gets one output line, in order:
//   {"logprob": float, "is_greedy": bool, "n_tokens": int}   (the first two kinds)
//   {"text": str, "n_tokens": int}                           (generation)
#pragma once

#include "eval/generate_until.h"

#include <string>

namespace xsagpt::eval {

struct LineRequest {
  enum Kind { kPair, kRolling, kGenerate } kind = kPair;
  std::string context, continuation;  // kPair
  std::string text;                   // kRolling
  GenerateRequest generate;           // kGenerate
  std::string where;                  // "file:line", for messages
};

// Throws ConfigError naming `where` for malformed JSON, an unknown kind or a
// mistyped field.
LineRequest parse_request_line(const std::string& line, const std::string& where);

}  // namespace xsagpt::eval
