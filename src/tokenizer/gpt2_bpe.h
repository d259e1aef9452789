// GPT-2's byte-level BPE tokenizer (the "r50k"/"gpt2" encoding), read from
// OpenAI's encoder.json and vocab.bpe, giving the same ids as tiktoken's gpt2
// encoding, which is what nanoGPT-style training data is tokenized with.
//
//   encode: the text is split into pieces by GPT-2's regex (contractions, letter
//   runs, digit runs, other-symbol runs, whitespace), each with at most one leading
//   space; each piece's UTF-8 bytes are then merged pairwise, always merging the
//   adjacent pair whose concatenation has the lowest rank (leftmost on ties) until
//   no adjacent pair is a token. As in tiktoken, a token's rank is its id.
//   decode: concatenate the tokens' bytes; decode() also makes them valid UTF-8.
//
// A model trained on a compact vocabulary (data/vocab.h: the K-1 most frequent GPT-2
// tokens of its corpus, and one id for all others) speaks other ids: after
// use_compact, encode gives compact ids (a token outside the table gives the shared
// id K-1), token_bytes and decode read compact ids (K-1 reads as a marker such as
// "<unk>"), and vocab_size, eot_id and token_id count in compact ids.
//
// File formats. Both files spell a byte string with one printable character per
// byte (GPT-2's "byte to unicode" table: bytes that are printable Latin-1 stand for
// themselves, the other 68 bytes are U+0100.. in byte order, e.g. ' ' -> 'Ġ').
//   encoder.json  {"token": id, ...}: the 256 single bytes, every merge result, and
//                 the special token <|endoftext|>; ids 0..N-1, each once.
//   vocab.bpe     a "#version" header line, then one merge "left right" per line
//                 in priority order; merge i creates the token with id 256 + i.
// Loading checks that the two files agree (as tiktoken's loader does), so files
// from different vocabularies or damaged files are reported, naming the file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace xsagpt {

// How literal special-token text ("<|endoftext|>") in the input is encoded.
enum class SpecialTokens {
  kAsText,   // as ordinary text, several tokens (tiktoken's encode_ordinary)
  kAllowed,  // as the special token's id (tiktoken's encode(allowed_special="all"))
};

class Gpt2Tokenizer {
 public:
  static constexpr std::string_view kEndOfText = "<|endoftext|>";

  // Reads dir/encoder.json and dir/vocab.bpe; throws ConfigError naming the file
  // when one is missing, malformed, or disagrees with the other.
  explicit Gpt2Tokenizer(const std::filesystem::path& dir);

  // Loads from find_gpt2_vocab_dir(explicit_dir).
  static Gpt2Tokenizer load(const std::string& explicit_dir = "");

  // Token ids of UTF-8 text; throws std::invalid_argument (giving the byte
  // offset) if the text is not valid UTF-8. Thread-safe.
  std::vector<int32_t> encode(std::string_view text, SpecialTokens special = SpecialTokens::kAsText) const;

  // Concatenated bytes of the tokens; throws std::out_of_range for an id outside
  // [0, vocab_size()). May end inside a character: see utf8::StreamDecoder.
  std::string decode_bytes(std::span<const int32_t> ids) const;
  // decode_bytes with ill-formed UTF-8 replaced by U+FFFD, like tiktoken's decode.
  std::string decode(std::span<const int32_t> ids) const;

  // 50257 for GPT-2, K after use_compact
  int32_t vocab_size() const { return static_cast<int32_t>(compact() ? compact_bytes_.size() : bytes_of_.size()); }
  int32_t eot_id() const { return compact() ? to_compact_[eot_id_] : eot_id_; }  // 50256 for GPT-2
  const std::string& token_bytes(int32_t id) const;
  // The id of the token spelled by exactly these bytes, if there is one.
  std::optional<int32_t> token_id(std::string_view bytes) const;

  // Renumbers to a compact vocabulary: id i is GPT-2 token gpt2_ids[i] (distinct, each
  // < 50257), id gpt2_ids.size() every other token, reading as rest_marker.
  // std::invalid_argument for ids that are not GPT-2 tokens.
  void use_compact(const std::vector<int64_t>& gpt2_ids, const std::string& rest_marker);
  bool compact() const { return !to_compact_.empty(); }

 private:
  struct Pretokenizer;  // the compiled PCRE2 regex; defined in gpt2_bpe.cpp
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  // Multi-token pieces already merged during one encode() call; keys view its text.
  using Cache = std::unordered_map<std::string_view, std::vector<int32_t>>;

  void encode_ordinary(std::string_view text, std::vector<int32_t>& out, Cache& cache) const;
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

  std::vector<std::string> bytes_of_;  // id -> token bytes
  // Mergeable tokens only: the special token must never come out of a merge.
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> rank_of_;
  int32_t eot_id_ = -1;
  std::vector<int32_t> to_compact_;         // GPT-2 id -> compact id; empty: GPT-2 ids
  std::vector<std::string> compact_bytes_;  // compact id -> bytes (the last: the rest's marker)
  std::shared_ptr<const Pretokenizer> pretokenizer_;  // immutable; shared by copies
};

// Where GPT-2's encoder.json and vocab.bpe are: explicit_dir if not empty, else
// $XSAGPT_GPT2_VOCAB if set, else data/gpt2/ in the current directory or one of its
// parents, or beside the executable's folder (../ or ../../ from /proc/self/exe,
// i.e. the project root for build/xsagpt). An explicit or environment directory
// without the files is an error (naming it), not a reason to look elsewhere.
std::filesystem::path find_gpt2_vocab_dir(const std::string& explicit_dir = "");

}  // namespace xsagpt
