#include "tokenizer/gpt2_bpe.h"

#include "config/schema.h"
#include "tokenizer/utf8.h"
#include "util/json_read.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <fmt/format.h>
#include <pcre2.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <queue>
#include <sstream>
#include <stdexcept>

namespace xsagpt {

namespace fs = std::filesystem;

namespace {

// GPT-2's pre-tokenizer. \s is spelled \p{White_Space} because that is what \s
// means in tiktoken's (Rust) regex; PCRE2's \s differs (e.g. it excludes U+0085).
constexpr std::string_view kPattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\p{White_Space}\p{L}\p{N}]+)"
                                      R"(|\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+)";

// GPT-2's byte <-> character table used to spell tokens in both files: the 188
// printable Latin-1 bytes are their own code point, the other 68 bytes become
// U+0100.. in byte order. Single-byte tokens are ranked in the same order.
struct ByteAlphabet {
  std::array<int, 256 + 68> byte_of_char;  // code point -> byte, -1 outside the alphabet
  std::array<int32_t, 256> rank_of_byte;

  ByteAlphabet() {
    byte_of_char.fill(-1);
    const auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; };
    int32_t rank = 0, extra = 0;
    for (int b = 0; b < 256; ++b)
      if (printable(b)) byte_of_char[b] = b, rank_of_byte[b] = rank++;
    for (int b = 0; b < 256; ++b)
      if (!printable(b)) byte_of_char[256 + extra++] = b, rank_of_byte[b] = rank++;
  }

  // The bytes a token spelling stands for; nullopt if a character is outside the
  // alphabet. `s` must be valid UTF-8.
  std::optional<std::string> decode(std::string_view s) const {
    std::string out;
    for (size_t i = 0; i < s.size();) {
      const auto c = static_cast<unsigned char>(s[i]);
      uint32_t cp;
      if (c < 0x80)
        cp = c, i += 1;
      else if (c < 0xE0)
        cp = (c & 0x1Fu) << 6 | (static_cast<unsigned char>(s[i + 1]) & 0x3Fu), i += 2;
      else
        return std::nullopt;  // three- and four-byte characters are all above U+0143
      if (cp >= byte_of_char.size() || byte_of_char[cp] < 0) return std::nullopt;
      out.push_back(static_cast<char>(byte_of_char[cp]));
    }
    return out;
  }
};

const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet table;
  return table;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("{}: cannot open: {}", path.string(), std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string shorten(std::string_view s) {  // for error messages; cuts between characters
  if (s.size() <= 40) return std::string(s);
  size_t cut = 37;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return std::string(s.substr(0, cut)) + "...";
}

}  // namespace

struct Gpt2Tokenizer::Pretokenizer {
  pcre2_code* code = nullptr;

  Pretokenizer() {
    int err;
    PCRE2_SIZE at;
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern.data()), kPattern.size(), PCRE2_UTF, &err, &at, nullptr);
    if (!code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      throw std::logic_error(fmt::format("GPT-2 pre-tokenizer regex, offset {}: {}", at, reinterpret_cast<char*>(msg)));
    }
    // JIT is several times faster; without it (unsupported CPU) the interpreter still works.
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  }
  ~Pretokenizer() { pcre2_code_free(code); }
  Pretokenizer(const Pretokenizer&) = delete;
  Pretokenizer& operator=(const Pretokenizer&) = delete;
};

Gpt2Tokenizer::Gpt2Tokenizer(const fs::path& dir) : pretokenizer_(std::make_shared<Pretokenizer>()) {
  const ByteAlphabet& alphabet = byte_alphabet();

  // encoder.json: token spelling -> id.
  const fs::path enc_path = dir / "encoder.json";
  const std::string enc_name = enc_path.string();
  nlohmann::json encoder;
  try {
    encoder = parse_json(read_file(enc_path), enc_path.string());
  } catch (const nlohmann::json::parse_error& e) {
    throw ConfigError(fmt::format("{}: not valid JSON: {}", enc_name, e.what()));
  }
  if (!encoder.is_object() || encoder.empty())
    throw ConfigError(enc_name + ": expected a JSON object mapping token strings to ids");
  const size_t n = encoder.size();
  bytes_of_.resize(n);
  std::vector<bool> seen(n, false);
  for (const auto& [spelling, id_json] : encoder.items()) {
    if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0 || id_json.get<int64_t>() >= int64_t(n))
      throw ConfigError(fmt::format("{}: token \"{}\": expected an id in [0, {}), got {}", enc_name, shorten(spelling),
                                    n, schema::show(id_json)));
    const auto id = id_json.get<int32_t>();
    if (seen[id]) throw ConfigError(fmt::format("{}: id {} is given to more than one token", enc_name, id));
    seen[id] = true;
    if (spelling == kEndOfText) {
      eot_id_ = id;
      bytes_of_[id] = spelling;
      continue;
    }
    auto bytes = alphabet.decode(spelling);
    if (!bytes || bytes->empty())
      throw ConfigError(
          fmt::format("{}: token \"{}\" is not spelled in GPT-2's byte alphabet", enc_name, shorten(spelling)));
    bytes_of_[id] = *bytes;
    if (!rank_of_.emplace(std::move(*bytes), id).second)
      throw ConfigError(
          fmt::format("{}: token \"{}\" spells the same bytes as another token", enc_name, shorten(spelling)));
  }
  if (eot_id_ < 0) throw ConfigError(fmt::format("{}: has no {} token", enc_name, kEndOfText));

  // vocab.bpe: merges in priority order. The ids in encoder.json must be exactly
  // the ranks these imply, since encoding ranks merges by id.
  const fs::path bpe_path = dir / "vocab.bpe";
  const std::string bpe_name = bpe_path.string();
  const std::string merges = read_file(bpe_path);
  if (size_t bad = utf8::first_invalid(merges); bad != merges.size())
    throw ConfigError(fmt::format("{}: not valid UTF-8 at byte {}", bpe_name, bad));
  for (int b = 0; b < 256; ++b) {
    auto it = rank_of_.find(std::string(1, static_cast<char>(b)));
    if (it == rank_of_.end() || it->second != alphabet.rank_of_byte[b])
      throw ConfigError(
          fmt::format("{}: the single-byte token for byte {} must have id {}, as the byte alphabet ranks "
                      "it (is this GPT-2's encoder.json?)",
                      enc_name, b, alphabet.rank_of_byte[b]));
  }
  std::istringstream lines(merges);
  std::string line;
  if (!std::getline(lines, line) || !line.starts_with("#version"))
    throw ConfigError(bpe_name + ": line 1: expected the \"#version: ...\" header");
  int32_t rank = 256;
  for (int line_no = 2; std::getline(lines, line); ++line_no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    const bool two_parts = space != std::string::npos && space > 0 && space + 1 < line.size() &&
                           line.find(' ', space + 1) == std::string::npos;
    auto left = two_parts ? alphabet.decode(std::string_view(line).substr(0, space)) : std::nullopt;
    auto right = two_parts ? alphabet.decode(std::string_view(line).substr(space + 1)) : std::nullopt;
    if (!left || !right)
      throw ConfigError(
          fmt::format("{}: line {}: expected two tokens in GPT-2's byte alphabet separated by one "
                      "space, got \"{}\"",
                      bpe_name, line_no, shorten(line)));
    auto it = rank_of_.find(*left + *right);
    if (it == rank_of_.end() || it->second != rank)
      throw ConfigError(fmt::format(
          "{}: line {}: merge \"{}\" has rank {}, but {} {} (files from different "
          "vocabularies?)",
          bpe_name, line_no, shorten(line), rank, enc_name,
          it == rank_of_.end() ? std::string("lacks the merged token") : fmt::format("gives it id {}", it->second)));
    ++rank;
  }
  if (static_cast<size_t>(rank) != rank_of_.size())
    throw ConfigError(fmt::format("{}: has {} merges, but {} has {} tokens besides the 256 bytes and {}", bpe_name,
                                  rank - 256, enc_name, rank_of_.size() - 256, kEndOfText));
}

Gpt2Tokenizer Gpt2Tokenizer::load(const std::string& explicit_dir) {
  return Gpt2Tokenizer(find_gpt2_vocab_dir(explicit_dir));
}

std::vector<int32_t> Gpt2Tokenizer::encode(std::string_view text, SpecialTokens special) const {
  // PCRE2 would validate the whole text at every match; once up front is enough.
  if (size_t bad = utf8::first_invalid(text); bad != text.size())
    throw std::invalid_argument(fmt::format("text is not valid UTF-8 at byte {}", bad));
  std::vector<int32_t> out;
  out.reserve(text.size() / 4 + 1);
  Cache cache;
  if (special == SpecialTokens::kAllowed) {
    size_t at;
    while ((at = text.find(kEndOfText)) != std::string_view::npos) {
      encode_ordinary(text.substr(0, at), out, cache);
      out.push_back(eot_id_);
      text.remove_prefix(at + kEndOfText.size());
    }
  }
  encode_ordinary(text, out, cache);
  if (compact())
    for (auto& id : out) id = to_compact_[id];
  return out;
}

void Gpt2Tokenizer::encode_ordinary(std::string_view text, std::vector<int32_t>& out, Cache& cache) const {
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create_from_pattern(pretokenizer_->code, nullptr), &pcre2_match_data_free);
  if (!match) throw std::bad_alloc();
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  for (size_t pos = 0; pos < text.size();) {
    const int rc =
        pcre2_match(pretokenizer_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, match.get(), nullptr);
    const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match.get());
    // Every character is a letter, a digit, whitespace or none of these, so the
    // pieces tile the text; anything else is a bug (or a PCRE2 resource limit).
    if (rc < 0 || span[0] != pos) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      throw std::runtime_error(fmt::format("GPT-2 pre-tokenizer failed at byte {}: {}", pos,
                                           rc < 0 ? reinterpret_cast<char*>(msg) : "skipped text"));
    }
    const std::string_view piece = text.substr(pos, span[1] - pos);
    pos = span[1];
    if (auto it = rank_of_.find(piece); it != rank_of_.end()) {  // most English words are one token
      out.push_back(it->second);
      continue;
    }
    auto [it, fresh] = cache.try_emplace(piece);
    if (fresh) encode_piece(piece, it->second);
    out.insert(out.end(), it->second.begin(), it->second.end());
  }
}

// BPE on one piece with a heap of candidate merges, O(n log n) in the piece length
// (pieces can be long: a run of digits or spaces is one piece). Merges happen in
// the order (rank, position) as in tiktoken's quadratic loop, so the result is
// the same. A symbol is named by the offset of its first byte; end[i] is the offset
// after it, or 0 once it has been merged into its left neighbour.
void Gpt2Tokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  const int n = static_cast<int>(piece.size());
  std::vector<int> end(n), prev(n);
  for (int i = 0; i < n; ++i) end[i] = i + 1, prev[i] = i - 1;
  struct Merge {
    int32_t rank;
    int left, mid, right_end;  // merges the symbols [left, mid) and [mid, right_end)
    bool operator>(const Merge& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Merge, std::vector<Merge>, std::greater<>> heap;
  const auto consider = [&](int left, int mid, int right_end) {
    if (auto it = rank_of_.find(piece.substr(left, right_end - left)); it != rank_of_.end())
      heap.push({it->second, left, mid, right_end});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i, i + 1, i + 2);
  while (!heap.empty()) {
    const Merge m = heap.top();
    heap.pop();
    if (end[m.left] != m.mid || end[m.mid] != m.right_end) continue;  // a neighbour changed since
    end[m.left] = m.right_end;
    end[m.mid] = 0;
    if (m.right_end < n) prev[m.right_end] = m.left;
    if (prev[m.left] >= 0) consider(prev[m.left], m.left, m.right_end);
    if (m.right_end < n) consider(m.left, m.right_end, end[m.right_end]);
  }
  for (int i = 0; i < n; i = end[i]) out.push_back(rank_of_.find(piece.substr(i, end[i] - i))->second);
}

const std::string& Gpt2Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size())
    throw std::out_of_range(fmt::format("token id {} is outside the vocabulary [0, {})", id, vocab_size()));
  return compact() ? compact_bytes_[id] : bytes_of_[id];
}

std::optional<int32_t> Gpt2Tokenizer::token_id(std::string_view bytes) const {
  std::optional<int32_t> id;
  if (bytes == kEndOfText)
    id = eot_id_;
  else if (auto it = rank_of_.find(bytes); it != rank_of_.end())
    id = it->second;
  if (!id || !compact()) return id;
  // A token outside the table has no id of its own: the rest id stands for many.
  const int32_t c = to_compact_[*id];
  return c == vocab_size() - 1 ? std::nullopt : std::optional<int32_t>(c);
}

void Gpt2Tokenizer::use_compact(const std::vector<int64_t>& gpt2_ids, const std::string& rest_marker) {
  const auto n = static_cast<int32_t>(bytes_of_.size());
  std::vector<int32_t> to(n, static_cast<int32_t>(gpt2_ids.size()));
  std::vector<std::string> bytes;
  for (size_t i = 0; i < gpt2_ids.size(); ++i) {
    const int64_t g = gpt2_ids[i];
    if (g < 0 || g >= n || to[g] != static_cast<int32_t>(gpt2_ids.size()))
      throw std::invalid_argument(fmt::format("compact id {}: {} is not a GPT-2 token id (0..{}) or repeats", i, g,
                                              n - 1));
    to[g] = static_cast<int32_t>(i);
    bytes.push_back(bytes_of_[g]);
  }
  bytes.push_back(rest_marker);
  to_compact_ = std::move(to);
  compact_bytes_ = std::move(bytes);
}

std::string Gpt2Tokenizer::decode_bytes(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) out += token_bytes(id);
  return out;
}

std::string Gpt2Tokenizer::decode(std::span<const int32_t> ids) const {
  return utf8::replace_invalid(decode_bytes(ids));
}

}  // namespace xsagpt
