// `xsagpt data --check PATTERN`: validates token shards the way the trainer will
// read them, and reports what they hold as JSON, before any GPU time is spent.
// Unlike the loader, it scans every token (vocabulary range, document count). A
// file name that is not UTF-8 is reported with those bytes escaped as \xNN.
#include "cli/commands.h"
#include "cli/options.h"
#include "config/schema.h"
#include "data/shard.h"
#include "util/utf8.h"

#include <fmt/format.h>

#include <iostream>

namespace xsagpt::cli {

namespace {

constexpr uint16_t kEndOfText = 50256;        // GPT-2's <|endoftext|>: one per document
using ordered_json = nlohmann::ordered_json;  // keys in the order written, for people reading it

ordered_json check_file(const std::string& path, int64_t vocab, int64_t dump) {
  const ShardInfo info = inspect_shard(path);
  const MappedShard m(info);
  const uint16_t* tok = m.tokens();
  uint16_t mx = 0;
  int64_t docs = 0;
  for (int64_t i = 0; i < info.num_tokens; ++i) {
    mx = std::max(mx, tok[i]);
    docs += tok[i] == kEndOfText;
  }
  if (info.num_tokens > 0 && mx >= vocab) {
    int64_t i = 0;
    while (tok[i] < vocab) ++i;
    throw DataError(fmt::format("{}: token id {} at token offset {} (byte {}) is >= vocab_size {}", path, tok[i], i,
                                info.header_bytes + 2 * i, vocab));
  }
  ordered_json first = ordered_json::array();
  for (int64_t i = 0; i < std::min(dump, info.num_tokens); ++i) first.push_back(tok[i]);
  ordered_json j = {{"path", utf8::escape_invalid(path)},  // JSON holds UTF-8 only
                    {"format", format_name(info.format)},
                    {"tokens", info.num_tokens},
                    {"documents", docs},
                    {"max_token", info.num_tokens ? ordered_json(mx) : ordered_json(nullptr)}};
  if (dump > 0) j["first_tokens"] = std::move(first);
  return j;
}

}  // namespace

int data(int argc, char** argv) {
  cxxopts::Options opts("xsagpt data",
                        "Check token shards (llm.c format or headerless uint16) and print what they hold as JSON.");
  // clang-format off
  opts.add_options()
    ("check", "glob pattern(s) of shards, several separated by ','", cxxopts::value<std::string>())
    ("dump", "also print the first N tokens of each shard", cxxopts::value<int64_t>()->default_value("0"))
    ("vocab-size", "token ids must be below this", cxxopts::value<int64_t>()->default_value("50304"));
  // clang-format on
  const auto parsed = parse_command(opts, argc, argv);
  if (!parsed) return 0;
  const auto& args = *parsed;
  if (!args.count("check")) throw ConfigError("--check: required (e.g. --check 'data/kjv/shards/*.bin')");
  const int64_t dump = args["dump"].as<int64_t>(), vocab = args["vocab-size"].as<int64_t>();
  if (dump < 0) throw ConfigError("--dump: must be >= 0");
  if (vocab <= 0 || vocab > 65536) throw ConfigError("--vocab-size: expected 1..65536 (tokens are uint16)");

  ordered_json files = ordered_json::array();
  int64_t tokens = 0, docs = 0, bad = 0;
  for (const auto& path : expand_patterns(args["check"].as<std::string>())) {
    try {
      auto j = check_file(path, vocab, dump);
      tokens += j["tokens"].get<int64_t>();
      docs += j["documents"].get<int64_t>();
      files.push_back(std::move(j));
    } catch (const DataError& e) {
      files.push_back({{"path", utf8::escape_invalid(path)}, {"error", utf8::escape_invalid(e.what())}});
      ++bad;
    }
  }
  std::cout
      << ordered_json{{"total_tokens", tokens}, {"total_documents", docs}, {"errors", bad}, {"files", files}}.dump(2)
      << "\n";
  return bad ? 1 : 0;
}

}  // namespace xsagpt::cli
