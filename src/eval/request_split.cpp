#include "eval/request_split.h"

#include <nlohmann/json.hpp>

#include <stdexcept>

namespace xsagpt::eval {

namespace {

// Python's str.isspace(): bidirectional class WS, B or S, or general category Zs.
bool python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

}  // namespace

size_t trailing_space_start(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;  // back to the lead byte of the last code point
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    const auto lead = static_cast<unsigned char>(s[start]);
    const size_t len = end - start;
    char32_t c = len == 1 ? lead : len == 2 ? lead & 0x1F : len == 3 ? lead & 0x0F : lead & 0x07;
    for (size_t i = start + 1; i < end; ++i) c = (c << 6) | (static_cast<unsigned char>(s[i]) & 0x3F);
    if (!python_space(c)) break;
    end = start;
  }
  return end;
}

size_t code_points(std::string_view s) {
  size_t n = 0;
  for (char ch : s) n += (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
  return n;
}

namespace {

std::vector<int64_t> encode(const Gpt2Tokenizer& tok, std::string_view text) {
  auto ids = tok.encode(text, SpecialTokens::kAllowed);
  return {ids.begin(), ids.end()};
}

// The last few characters of `s`, cut at a code point boundary (for messages).
std::string tail_of(std::string_view s, size_t bytes) {
  size_t start = s.size() > bytes ? s.size() - bytes : 0;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  return std::string(s.substr(start));
}

void refuse_empty(const TokenRequest& r, std::string_view context, std::string_view continuation) {
  if (!r.continuation.empty()) return;
  if (continuation.empty())
    throw SplitError("the continuation is empty: there is nothing to score (lm-eval refuses such a request)");
  const std::string where = context.empty() ? std::string("(the end-of-text token)")
                                            : nlohmann::json(tail_of(context, 24)).dump() + " (its end)";
  throw SplitError("the continuation " + nlohmann::json(std::string(continuation)).dump() +
                   " has no tokens of its own: GPT-2's BPE merges it into the context " + where +
                   ", so the context's tokens already cover it (lm-eval refuses such a request)");
}

}  // namespace

TokenRequest split_pair(const Gpt2Tokenizer& tok, std::string_view context, std::string_view continuation) {
  const std::string_view given_context = context, given_continuation = continuation;
  const int64_t prefix = tok.eot_id();
  std::string cont(continuation);
  if (const size_t cut = trailing_space_start(context); cut < context.size()) {
    cont.insert(0, context.substr(cut));
    context = context.substr(0, cut);
  }
  TokenRequest r;
  if (context.empty()) {
    r.context = {prefix};
    r.continuation = encode(tok, cont);
    if (!r.continuation.empty() && r.continuation.front() == prefix) r.continuation.erase(r.continuation.begin());
    refuse_empty(r, given_context, given_continuation);
    return r;
  }
  auto whole = encode(tok, std::string(context) + cont);
  r.context = encode(tok, context);
  if (r.context.size() < whole.size())
    r.continuation.assign(whole.begin() + static_cast<ptrdiff_t>(r.context.size()), whole.end());
  refuse_empty(r, given_context, given_continuation);
  return r;
}

std::vector<TokenRequest> rolling_windows(const std::vector<int64_t>& tokens, int64_t prefix_token, int64_t max_len) {
  if (max_len < 1) throw std::invalid_argument("rolling_windows: max_len must be >= 1");
  std::vector<TokenRequest> out;
  const auto n = static_cast<int64_t>(tokens.size());
  auto slice = [&](int64_t from, int64_t to) {
    return std::vector<int64_t>(tokens.begin() + from, tokens.begin() + to);
  };
  if (n == 0) return out;
  // The first window predicts its tokens from the prefix token and each other.
  int64_t done = std::min(max_len, n);
  out.push_back({{prefix_token}, slice(0, done)});
  // Each later one predicts the next (up to) max_len tokens; its input is the
  // max_len tokens before each of them, so the context is what precedes the
  // predicted part inside that input.
  while (done < n) {
    const int64_t m = std::min(n - done, max_len), end = done + m;
    out.push_back({slice(end - max_len - 1, end - m), slice(end - m, end)});
    done = end;
  }
  return out;
}

}  // namespace xsagpt::eval
