// How text becomes the token requests a log-likelihood is computed for, exactly as
// lm-evaluation-harness does it for a causal model, so that a score from xsagpt and
// one from the harness mean the same thing.
//
// A (context, continuation) pair (the harness's loglikelihood):
//   - trailing whitespace of the context (Python's str.rstrip, i.e. str.isspace)
//     moves to the front of the continuation ("Answer: " + "yes" scores " yes");
//   - context + continuation is encoded as one text; the context's tokens are the
//     encoding of the context alone, and the continuation's tokens are whatever
//     follows that many tokens in the joint encoding (BPE may merge across the
//     boundary; the harness accepts that, so do we);
//   - a pair whose continuation gets no tokens of its own (an empty continuation,
//     or one BPE merges whole into the context's last token: "hell" + "o") is
//     refused with a SplitError, as the harness's Hugging Face model refuses it
//     (an assertion there), rather than scored as log-probability 0;
//   - an empty context becomes the end-of-text token (the "prefix token"), unless
//     the continuation itself starts with it.
// A whole text (loglikelihood_rolling): its tokens are cut into windows that each
// predict up to max_len tokens, the first conditioned on the prefix token, the
// others on as many preceding tokens as fit in the model's window, so every token
// is predicted exactly once (the harness's rolling windows, made disjoint).
//
// When scored, a request's context is cut on the left so that context+continuation
// fits the model's window (eval/scorer.h).
#pragma once

#include "tokenizer/gpt2_bpe.h"

#include <cstdint>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace xsagpt::eval {

struct TokenRequest {
  std::vector<int64_t> context;       // at least one token whenever continuation is not empty
  std::vector<int64_t> continuation;  // the tokens whose log-probabilities are summed
};

// Byte offset where the trailing whitespace of UTF-8 text `s` starts (s.size() if
// none): the code points Python's str.isspace() accepts, so that the result equals
// len(s.rstrip()) in bytes.
size_t trailing_space_start(std::string_view s);

// Number of code points in valid UTF-8 text (Python's len of the str).
size_t code_points(std::string_view s);

// A pair the harness would refuse; the message says why (the caller adds where).
struct SplitError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// The harness's split of a (context, continuation) pair. Literal "<|endoftext|>"
// in the text is the special token, as GPT-2's tokenizer in the harness reads it.
// A context that is only whitespace is treated as empty after the move (the
// harness would leave the first continuation token unconditioned there). Throws
// SplitError when the continuation has no tokens of its own.
TokenRequest split_pair(const Gpt2Tokenizer& tok, std::string_view context, std::string_view continuation);

// The disjoint rolling windows over `tokens` for a model that sees max_len tokens;
// none for an empty text.
std::vector<TokenRequest> rolling_windows(const std::vector<int64_t>& tokens, int64_t prefix_token, int64_t max_len);

}  // namespace xsagpt::eval
