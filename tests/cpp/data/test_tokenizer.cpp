// GPT-2 BPE tokenizer and UTF-8 helpers. Expected ids come from the vocabulary
// files themselves, read here independently of the tokenizer: single-token pieces
// are looked up in encoder.json, multi-token words are merged by a direct
// transcription of GPT-2's encoder.py (merge rules from vocab.bpe, all occurrences
// of the best pair at once). The token-for-token comparison with tiktoken on large
// texts is tests/python/data/test_tokenizer_tiktoken.py.
#include "config/schema.h"
#include "helpers.h"
#include "tokenizer/gpt2_bpe.h"
#include "tokenizer/utf8.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

using namespace xsagpt;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

// A namespace of this file's own, not an anonymous one: its fixture is the base of the
// TEST_F classes, which have external linkage (GCC's -Wsubobject-linkage).
namespace test_tokenizer {

std::optional<fs::path> vocab_dir() {  // same places as tests/python/conftest.py
  std::vector<fs::path> cands;
  if (const char* env = std::getenv("XSAGPT_GPT2_VOCAB")) cands.emplace_back(env);
  cands.push_back(test::source_path("data/gpt2"));
  cands.push_back(fs::path(test::source_path("")).parent_path().parent_path() / "shared" / "data" / "gpt2");
  for (const auto& d : cands)
    if (fs::exists(d / "encoder.json") && fs::exists(d / "vocab.bpe")) return d;
  return std::nullopt;
}

std::string utf8_of(uint32_t cp) {
  std::string s;
  if (cp < 0x80)
    s += char(cp);
  else if (cp < 0x800)
    s += char(0xC0 | cp >> 6), s += char(0x80 | (cp & 0x3F));
  else if (cp < 0x10000)
    s += char(0xE0 | cp >> 12), s += char(0x80 | (cp >> 6 & 0x3F)), s += char(0x80 | (cp & 0x3F));
  else
    s += char(0xF0 | cp >> 18), s += char(0x80 | (cp >> 12 & 0x3F)), s += char(0x80 | (cp >> 6 & 0x3F)),
        s += char(0x80 | (cp & 0x3F));
  return s;
}

// GPT-2's bytes_to_unicode() as written in its encoder.py: the printable byte
// ranges keep their code point, the rest get 256, 257, ... in byte order.
std::vector<std::string> gpt2_byte_spelling() {
  std::vector<int> bs;
  for (int b = '!'; b <= '~'; ++b) bs.push_back(b);
  for (int b = 0xA1; b <= 0xAC; ++b) bs.push_back(b);
  for (int b = 0xAE; b <= 0xFF; ++b) bs.push_back(b);
  std::vector<std::string> spell(256);
  for (int b : bs) spell[b] = utf8_of(b);
  int n = 0;
  for (int b = 0; b < 256; ++b)
    if (spell[b].empty()) spell[b] = utf8_of(256 + n++);
  return spell;
}

// The vocabulary as GPT-2's encoder.py reads it.
struct Reference {
  std::map<std::string, int32_t> encoder;  // spelled token -> id
  std::map<std::pair<std::string, std::string>, int> merge_rank;
  std::vector<std::string> spell = gpt2_byte_spelling();

  explicit Reference(const fs::path& dir) {
    const json enc = json::parse(test::slurp(dir / "encoder.json"));
    for (const auto& [k, v] : enc.items()) encoder[k] = v.get<int32_t>();
    std::istringstream lines(test::slurp(dir / "vocab.bpe"));
    std::string line;
    std::getline(lines, line);  // #version header
    for (int rank = 0; std::getline(lines, line);)
      if (!line.empty()) merge_rank[{line.substr(0, line.find(' ')), line.substr(line.find(' ') + 1)}] = rank++;
  }

  std::string spelled(std::string_view bytes) const {
    std::string s;
    for (unsigned char b : bytes) s += spell[b];
    return s;
  }

  // Id of a piece that is a single token (checked).
  int32_t id(std::string_view bytes) const {
    auto it = encoder.find(spelled(bytes));
    if (it == encoder.end()) throw std::logic_error("test assumption: \"" + std::string(bytes) + "\" is one token");
    return it->second;
  }

  // encoder.py's bpe(): merge the lowest-ranked adjacent pair (all its occurrences)
  // until no adjacent pair is a merge rule. Only for one pre-tokenized piece.
  std::vector<int32_t> bpe(std::string_view bytes) const {
    std::vector<std::string> word;
    for (unsigned char b : bytes) word.push_back(spell[b]);
    while (word.size() > 1) {
      int best = INT32_MAX;
      std::pair<std::string, std::string> best_pair;
      for (size_t i = 0; i + 1 < word.size(); ++i)
        if (auto it = merge_rank.find({word[i], word[i + 1]}); it != merge_rank.end() && it->second < best)
          best = it->second, best_pair = it->first;
      if (best == INT32_MAX) break;
      std::vector<std::string> merged;
      for (size_t i = 0; i < word.size(); ++i) {
        if (i + 1 < word.size() && word[i] == best_pair.first && word[i + 1] == best_pair.second)
          merged.push_back(word[i] + word[i + 1]), ++i;
        else
          merged.push_back(word[i]);
      }
      word = std::move(merged);
    }
    std::vector<int32_t> ids;
    for (const auto& t : word) ids.push_back(encoder.at(t));
    return ids;
  }
};

class Gpt2Bpe : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (auto d = vocab_dir()) {
      dir_ = *d;
      tok_ = std::make_unique<Gpt2Tokenizer>(*d);
      ref_ = std::make_unique<Reference>(*d);
    }
  }
  void SetUp() override {
    if (!tok_) GTEST_SKIP() << "GPT-2 vocabulary not found (set XSAGPT_GPT2_VOCAB)";
  }
  std::vector<int32_t> ids(std::initializer_list<std::string_view> single_token_pieces) const {
    std::vector<int32_t> out;
    for (auto p : single_token_pieces) out.push_back(ref_->id(p));
    return out;
  }
  std::vector<int32_t> pieces(std::initializer_list<std::string_view> pretokenized) const {
    std::vector<int32_t> out;
    for (auto p : pretokenized)
      for (int32_t id : ref_->bpe(p)) out.push_back(id);
    return out;
  }
  static inline fs::path dir_;
  static inline std::unique_ptr<Gpt2Tokenizer> tok_;
  static inline std::unique_ptr<Reference> ref_;
};

// A scratch copy of the vocabulary whose files a test may damage.
struct ScratchVocab {
  fs::path dir;
  explicit ScratchVocab(const fs::path& from) {
    dir = fs::temp_directory_path() / ("xsagpt-vocab-" + std::to_string(::getpid()) + "-" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir);
    fs::copy_file(from / "encoder.json", dir / "encoder.json", fs::copy_options::overwrite_existing);
    fs::copy_file(from / "vocab.bpe", dir / "vocab.bpe", fs::copy_options::overwrite_existing);
  }
  ~ScratchVocab() { test::remove_tree(dir); }
  void write(const std::string& name, const std::string& content) const { std::ofstream(dir / name) << content; }
  std::string read(const std::string& name) const { return test::slurp(dir / name); }
};

}  // namespace test_tokenizer
using namespace test_tokenizer;

// ---- UTF-8 -------------------------------------------------------------------

TEST(Utf8, ReplacesMaximalSubpartsAsTheUnicodeStandardSpecifies) {
  // The worked example in the Unicode standard, section 3.9 ("U+FFFD Substitution
  // of Maximal Subparts"): each maximal subpart of an ill-formed sequence becomes
  // one U+FFFD.
  const std::string in = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(utf8::replace_invalid(in), "a" + r + r + r + "b" + r + "c" + r + r + "d");
  EXPECT_EQ(utf8::first_invalid(in), 1u);
  // Surrogates, overlong forms and code points past U+10FFFF are not UTF-8; their
  // lead byte has no valid continuation, so every byte is replaced separately.
  EXPECT_EQ(utf8::replace_invalid("\xED\xA0\x80"), r + r + r);
  EXPECT_EQ(utf8::replace_invalid("\xC0\xAF"), r + r);
  EXPECT_EQ(utf8::replace_invalid("\xF4\x90\x80\x80"), r + r + r + r);
  const std::string valid = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF";  // a é € 😀 U+10FFFF
  EXPECT_EQ(utf8::first_invalid(valid), valid.size());
  EXPECT_EQ(utf8::replace_invalid(valid), valid);
  EXPECT_EQ(utf8::first_invalid(valid.substr(0, valid.size() - 1)), valid.size() - 4);  // truncated at the end
}

TEST(Utf8, EscapingShowsEachBadByteAndKeepsTheRest) {
  // The same maximal subparts as above, each byte as \xNN; valid characters unchanged.
  EXPECT_EQ(utf8::escape_invalid("\x61\xF1\x80\x80\xE1\x80\xC2\x62\xC3\xA9\xFF"),
            "a\\xf1\\x80\\x80\\xe1\\x80\\xc2b\xC3\xA9\\xff");
  EXPECT_EQ(utf8::escape_invalid("runs/\xF0\x9F\x98\x80"), "runs/\xF0\x9F\x98\x80");
  const auto escaped = utf8::escape_invalid("runs/\xFF");
  EXPECT_EQ(utf8::first_invalid(escaped), escaped.size());
}

TEST(Utf8, StreamDecoderHoldsBackSplitCharactersOnly) {
  utf8::StreamDecoder d;
  EXPECT_EQ(d.push("a\xE2\x82"), "a");  // first two bytes of €
  EXPECT_EQ(d.push("\xAC"), "\xE2\x82\xAC");
  EXPECT_EQ(d.push("\xE2\x28"), "\xEF\xBF\xBD(");  // cannot become valid: replaced at once
  EXPECT_EQ(d.push("\xF0\x9F"), "");
  EXPECT_EQ(d.finish(), "\xEF\xBF\xBD");  // ended inside a character

  // Any split of any byte string gives what decoding it whole gives.
  std::mt19937 rng(7);
  const std::string alphabet = "a\x80\xBF\xC2\xC3\xA9\xE0\xA0\xED\x9F\xF0\x90\xF4\x8F\xFF";
  for (int trial = 0; trial < 300; ++trial) {
    std::string bytes;
    for (int i = 0; i < 24; ++i) bytes += alphabet[rng() % alphabet.size()];
    utf8::StreamDecoder s;
    std::string streamed;
    for (size_t i = 0; i < bytes.size();) {
      const size_t k = 1 + rng() % 3;
      streamed += s.push(std::string_view(bytes).substr(i, k));
      i += k;
    }
    streamed += s.finish();
    ASSERT_EQ(streamed, utf8::replace_invalid(bytes)) << "trial " << trial;
  }
}

// ---- encoding ------------------------------------------------------------------

TEST_F(Gpt2Bpe, VocabularyMatchesTheFiles) {
  EXPECT_EQ(tok_->vocab_size(), static_cast<int32_t>(ref_->encoder.size()));
  EXPECT_EQ(tok_->eot_id(), ref_->encoder.at("<|endoftext|>"));
  for (const auto& [spelled, id] : ref_->encoder) {
    if (spelled == "<|endoftext|>") continue;
    ASSERT_EQ(ref_->spelled(tok_->token_bytes(id)), spelled) << id;
  }
  EXPECT_EQ(tok_->token_id(" world"), ref_->id(" world"));
  EXPECT_EQ(tok_->token_id("<|endoftext|>"), tok_->eot_id());
  EXPECT_EQ(tok_->token_id("no such token here"), std::nullopt);
}

TEST_F(Gpt2Bpe, PreTokenizerSplitsAsGpt2) {
  EXPECT_EQ(tok_->encode("Hello world"), ids({"Hello", " world"}));
  EXPECT_EQ(tok_->encode("hello"), ids({"hello"}));
  EXPECT_EQ(tok_->encode("don't"), ids({"don", "'t"}));
  // Contractions are matched case-sensitively: "'S" is punctuation then a letter.
  EXPECT_EQ(tok_->encode("IT'S"), ids({"IT", "'", "S"}));
  // A run of spaces before a word leaves its last space to the word.
  EXPECT_EQ(tok_->encode("a  b"), ids({"a", " ", " b"}));
  EXPECT_EQ(tok_->encode("a \n\nb"), pieces({"a", " \n", "\n", "b"}));
  EXPECT_EQ(tok_->encode("a\n\n"), ids({"a", "\n\n"}));
  EXPECT_EQ(tok_->encode(" 2024"), ids({" 2024"}));
  EXPECT_EQ(tok_->encode("x=1;"), ids({"x", "=", "1", ";"}));
  EXPECT_EQ(tok_->encode(" caf\xC3\xA9"), ids({" caf\xC3\xA9"}));
  // No-break spaces are whitespace (Unicode White_Space, like \s in tiktoken's regex).
  EXPECT_EQ(tok_->encode("a\xC2\xA0\xC2\xA0"), ids({"a", "\xC2\xA0\xC2\xA0"}));
  EXPECT_EQ(tok_->encode("\xC2\xA0\xC2\xA0x"), pieces({"\xC2\xA0", "\xC2\xA0", "x"}));
  EXPECT_EQ(tok_->encode("\xE4\xB8\x80\xE4\xBA\x8C 3.14!?"),
            pieces({"\xE4\xB8\x80\xE4\xBA\x8C", " 3", ".", "14", "!?"}));
  EXPECT_TRUE(tok_->encode("").empty());
}

TEST_F(Gpt2Bpe, MergesAgreeWithGpt2ReferenceBpe) {
  // Single pieces (no pre-tokenizer involved) that take several merges.
  std::vector<std::string> words = {"internationalization",
                                    " Supercalifragilisticexpialidocious",
                                    " tokenizer",
                                    "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E",
                                    " \xF0\x9F\x98\x80\xF0\x9F\x98\x80",
                                    std::string(300, 'a'),
                                    std::string(257, ' '),
                                    " 31415926535897932384626"};
  std::mt19937 rng(1);
  for (int i = 0; i < 200; ++i) {  // random letter strings: many unusual merge orders
    std::string w = rng() % 2 ? " " : "";
    for (int k = 0, n = 2 + rng() % 14; k < n; ++k) w += "etaoinshrdlucmfwyp"[rng() % 18];
    words.push_back(w);
  }
  for (const auto& w : words) {
    ASSERT_EQ(tok_->encode(w), ref_->bpe(w)) << "\"" << w << "\"";
  }
}

TEST_F(Gpt2Bpe, DecodeInvertsEncode) {
  std::vector<std::string> texts = {
      "The quick brown fox\n\n  jumps\tover 1234567 lazy dogs!!! \xE2\x80\x94 caf\xC3\xA9, na\xC3\xAF"
      "ve, "
      "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD   \n",
      std::string(5000, '7') + "   " + std::string(3000, '\n')};
  std::mt19937 rng(3);
  for (int t = 0; t < 50; ++t) {  // random code points from all planes, no surrogates
    std::string s;
    for (int i = 0; i < 64; ++i) {
      uint32_t cp;
      switch (rng() % 4) {
        case 0: cp = 0x20 + rng() % 0x60; break;
        case 1: cp = 0x80 + rng() % 0x780; break;
        case 2: cp = 0x800 + rng() % 0xF800; break;
        default: cp = 0x10000 + rng() % 0x100000; break;
      }
      if (cp >= 0xD800 && cp < 0xE000) cp = ' ';
      s += utf8_of(cp);
    }
    texts.push_back(s);
  }
  for (const auto& s : texts) {
    const auto ids = tok_->encode(s);
    ASSERT_EQ(tok_->decode_bytes(ids), s);
    ASSERT_EQ(tok_->decode(ids), s);
  }
}

TEST_F(Gpt2Bpe, EndOfTextIsTextUnlessAllowed) {
  const std::string s = "one.<|endoftext|>Two";
  const auto plain = tok_->encode(s);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), tok_->eot_id()), 0);
  EXPECT_EQ(tok_->decode(plain), s);
  std::vector<int32_t> expected = tok_->encode("one.");
  expected.push_back(tok_->eot_id());
  for (int32_t id : tok_->encode("Two")) expected.push_back(id);
  EXPECT_EQ(tok_->encode(s, SpecialTokens::kAllowed), expected);
  EXPECT_EQ(tok_->decode(expected), s);
  EXPECT_EQ(tok_->encode("<|endoftext|><|endoftext|>", SpecialTokens::kAllowed),
            (std::vector<int32_t>{tok_->eot_id(), tok_->eot_id()}));
}

TEST_F(Gpt2Bpe, DecodeReplacesSplitCharacters) {
  const auto ids = tok_->encode("\xF0\x9F\x98\x80");  // one emoji, several byte tokens
  ASSERT_GT(ids.size(), 1u);
  std::vector<int32_t> first(ids.begin(), ids.end() - 1);
  EXPECT_EQ(tok_->decode(first), utf8::replace_invalid(tok_->decode_bytes(first)));
  EXPECT_NE(tok_->decode(first), tok_->decode_bytes(first));
}

// ---- errors ------------------------------------------------------------------

TEST_F(Gpt2Bpe, BadInputIsReported) {
  EXPECT_THAT(test::error_of([&] { tok_->encode("ok\xFF"); }), HasSubstr("not valid UTF-8 at byte 2"));
  EXPECT_THROW(tok_->encode("ok\xFF"), std::invalid_argument);
  const std::vector<int32_t> bad = {1, tok_->vocab_size()};
  EXPECT_THAT(test::error_of([&] { tok_->decode(bad); }),
              HasSubstr("token id 50257 is outside the vocabulary [0, 50257)"));
  EXPECT_THROW(tok_->decode(std::vector<int32_t>{-1}), std::out_of_range);
}

TEST_F(Gpt2Bpe, DamagedVocabularyFilesAreNamed) {
  const auto load_error = [](const ScratchVocab& v) {
    try {
      Gpt2Tokenizer t(v.dir);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  {
    ScratchVocab v(dir_);
    fs::remove(v.dir / "vocab.bpe");
    EXPECT_THAT(load_error(v), HasSubstr((v.dir / "vocab.bpe").string() + ": cannot open"));
  }
  {
    ScratchVocab v(dir_);
    v.write("encoder.json", v.read("encoder.json").substr(0, 1000));
    EXPECT_THAT(load_error(v), HasSubstr((v.dir / "encoder.json").string() + ": not valid JSON"));
  }
  {
    ScratchVocab v(dir_);
    auto enc = json::parse(v.read("encoder.json"));
    enc.erase("<|endoftext|>");
    v.write("encoder.json", enc.dump());
    EXPECT_THAT(load_error(v), HasSubstr("encoder.json: has no <|endoftext|> token"));
    enc["<|endoftext|>"] = "50256";
    v.write("encoder.json", enc.dump());
    EXPECT_THAT(load_error(v), HasSubstr("encoder.json: token \"<|endoftext|>\": expected an id in [0, 50257)"));
  }
  {
    ScratchVocab v(dir_);
    const std::string bpe = v.read("vocab.bpe");
    v.write("vocab.bpe", bpe.substr(bpe.find('\n') + 1));  // no header
    EXPECT_THAT(load_error(v), HasSubstr("vocab.bpe: line 1: expected the \"#version: ...\" header"));
    std::string broken = bpe;
    broken.insert(broken.find('\n', broken.find('\n') + 1) + 1, "x y z\n");  // a bad line 3
    v.write("vocab.bpe", broken);
    EXPECT_THAT(load_error(v), HasSubstr("vocab.bpe: line 3: expected two tokens"));
  }
  {
    ScratchVocab v(dir_);  // two merges swapped: ids no longer follow merge order
    std::istringstream in(v.read("vocab.bpe"));
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    std::swap(lines[10], lines[11]);
    std::string out;
    for (const auto& l : lines) out += l + "\n";
    v.write("vocab.bpe", out);
    EXPECT_THAT(load_error(v), HasSubstr("vocab.bpe: line 11: merge \"" + lines[10] + "\" has rank 265"));
  }
}

TEST_F(Gpt2Bpe, VocabularyDirectoryIsFound) {
  struct Restore {
    fs::path cwd = fs::current_path();
    std::optional<std::string> env =
        std::getenv("XSAGPT_GPT2_VOCAB") ? std::optional<std::string>(std::getenv("XSAGPT_GPT2_VOCAB")) : std::nullopt;
    ~Restore() {
      fs::current_path(cwd);
      if (env)
        ::setenv("XSAGPT_GPT2_VOCAB", env->c_str(), 1);
      else
        ::unsetenv("XSAGPT_GPT2_VOCAB");
    }
  } restore;
  const fs::path root = fs::temp_directory_path() / ("xsagpt-root-" + std::to_string(::getpid()));
  fs::create_directories(root / "data" / "gpt2");
  fs::create_directories(root / "some" / "sub");
  fs::create_symlink(dir_ / "encoder.json", root / "data" / "gpt2" / "encoder.json");
  fs::create_symlink(dir_ / "vocab.bpe", root / "data" / "gpt2" / "vocab.bpe");

  ::unsetenv("XSAGPT_GPT2_VOCAB");
  fs::current_path(root / "some" / "sub");  // found from a subfolder of the project
  EXPECT_EQ(fs::canonical(find_gpt2_vocab_dir()), fs::canonical(root / "data" / "gpt2"));
  EXPECT_EQ(find_gpt2_vocab_dir(dir_.string()), dir_);  // explicit wins
  EXPECT_THAT(test::error_of([&] { find_gpt2_vocab_dir((root / "some").string()); }),
              HasSubstr((root / "some").string() + " has no encoder.json and vocab.bpe"));
  ::setenv("XSAGPT_GPT2_VOCAB", dir_.c_str(), 1);
  EXPECT_EQ(find_gpt2_vocab_dir(), dir_);
  ::setenv("XSAGPT_GPT2_VOCAB", (root / "some").c_str(), 1);  // set but wrong: an error, not a fallback
  EXPECT_THAT(test::error_of([&] { find_gpt2_vocab_dir(); }), HasSubstr("XSAGPT_GPT2_VOCAB: "));
  fs::current_path(restore.cwd);
  test::remove_tree(root);
}
