// `xsagpt tokenize`: GPT-2 token ids of a text as a JSON array, or (--decode) the
// text of a JSON array of ids. For inspecting prompts, and for checking the C++
// tokenizer against tiktoken (tests/python/data/test_tokenizer_tiktoken.py).
#include "cli/commands.h"
#include "cli/options.h"
#include "config/schema.h"
#include "tokenizer/gpt2_bpe.h"
#include "util/json_read.h"

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

namespace xsagpt::cli {

namespace {

std::string read_input(const std::string& file) {
  if (file == "-") return {std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) throw ConfigError(file + ": is a directory, expected a text file");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ConfigError(file + ": cannot open: " + std::strerror(errno));
  std::ostringstream ss;
  if (in.peek() != std::ifstream::traits_type::eof()) ss << in.rdbuf();  // << of an empty file sets failbit
  if (in.bad() || ss.fail()) throw ConfigError(file + ": cannot read");
  return ss.str();
}

std::vector<int32_t> parse_ids(const std::string& text, const std::string& name) {
  json j;
  try {
    j = parse_json(text, name);
  } catch (const json::parse_error& e) {
    throw ConfigError(fmt::format("{}: expected a JSON array of token ids: {}", name, e.what()));
  }
  if (!j.is_array()) throw ConfigError(name + ": expected a JSON array of token ids, got " + schema::show(j));
  std::vector<int32_t> ids;
  ids.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_number_integer() || j[i].get<int64_t>() < INT32_MIN || j[i].get<int64_t>() > INT32_MAX)
      throw ConfigError(fmt::format("{}: element {}: expected a token id, got {}", name, i, schema::show(j[i])));
    ids.push_back(j[i].get<int32_t>());
  }
  return ids;
}

}  // namespace

int tokenize(int argc, char** argv) {
  cxxopts::Options opts("xsagpt tokenize",
                        "GPT-2 BPE: print the token ids of a UTF-8 text as a JSON array, or with --decode the text\n"
                        "of a JSON array of ids (invalid UTF-8 from partial characters shown as U+FFFD).");
  // clang-format off
  opts.add_options()
    ("input", "file to read; - or none for stdin", cxxopts::value<std::string>()->default_value("-"))
    ("d,decode", "input is a JSON array of token ids; print its text")
    ("vocab", "directory with encoder.json and vocab.bpe (default: $XSAGPT_GPT2_VOCAB, else data/gpt2/)",
     cxxopts::value<std::string>())
    ("allow-special", "encode literal <|endoftext|> as its token id instead of as text")
    ("stats", "print counts and throughput to stderr");
  // clang-format on
  opts.parse_positional({"input"});
  opts.positional_help("[FILE]");
  const auto parsed = parse_command(opts, argc, argv);
  if (!parsed) return 0;
  const auto& args = *parsed;

  const std::string file = args["input"].as<std::string>();
  const std::string name = file == "-" ? "<stdin>" : file;
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const std::string input = read_input(file);  // a bad input is named before the vocabulary is looked for
  const auto tokenizer = Gpt2Tokenizer::load(args.count("vocab") ? args["vocab"].as<std::string>() : "");
  const auto t1 = clock::now();

  size_t n_tokens, n_bytes;
  clock::time_point t2;
  if (args.count("decode")) {
    const auto ids = parse_ids(input, name);
    std::string text;
    try {
      text = tokenizer.decode(ids);
    } catch (const std::out_of_range& e) {
      throw ConfigError(name + ": " + e.what());
    }
    t2 = clock::now();
    std::cout << text;
    n_tokens = ids.size(), n_bytes = text.size();
  } else {
    std::vector<int32_t> ids;
    try {
      ids = tokenizer.encode(input, args.count("allow-special") ? SpecialTokens::kAllowed : SpecialTokens::kAsText);
    } catch (const std::invalid_argument& e) {
      throw ConfigError(name + ": " + e.what());
    }
    t2 = clock::now();
    std::cout << "[" << fmt::format("{}", fmt::join(ids, ", ")) << "]\n";
    n_tokens = ids.size(), n_bytes = input.size();
  }
  std::cout.flush();
  if (args.count("stats")) {
    const double load_s = std::chrono::duration<double>(t1 - t0).count();
    const double run_s = std::chrono::duration<double>(t2 - t1).count();
    std::cerr << fmt::format(
        "{} bytes, {} tokens ({:.3f} bytes/token); vocabulary load {:.3f} s, {} {:.3f} s "
        "({:.2f} MB/s)\n",
        n_bytes, n_tokens, double(n_bytes) / std::max<size_t>(n_tokens, 1), load_s,
        args.count("decode") ? "decode" : "encode", run_s, n_bytes / 1e6 / run_s);
  }
  return 0;
}

}  // namespace xsagpt::cli
