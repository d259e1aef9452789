// `xsagpt sample`: text from a checkpoint. The prompt is encoded with GPT-2's BPE,
// tokens are sampled with a key/value cache, and the text is printed as it comes
// (a character split across tokens is printed once whole). A model trained on a
// compact vocabulary (its checkpoint's vocab, data/vocab.h) reads and writes compact
// ids: the prompt's tokens outside its table become the shared id, which prints as
// its marker ("<unk>"). Models trained on other
// token ids (e.g. the tests' 256-token vocabularies) use --prompt-ids and --ids.
#include "cli/commands.h"
#include "cli/options.h"
#include "config/schema.h"
#include "data/vocab.h"
#include "run/from_checkpoint.h"
#include "sample/generate.h"
#include "tokenizer/gpt2_bpe.h"
#include "tokenizer/utf8.h"
#include "util/device.h"
#include "util/json_read.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>

namespace xsagpt::cli {

namespace {

std::vector<int64_t> parse_prompt_ids(const std::string& text, int64_t vocab) {
  json j;
  try {
    j = parse_json(text.find('[') == std::string::npos ? "[" + text + "]" : text, "--prompt-ids");
  } catch (const json::parse_error&) {
    throw ConfigError("--prompt-ids: expected token ids like 1,2,3 or [1, 2, 3], got \"" + text + "\"");
  }
  std::vector<int64_t> ids;
  for (const auto& e : j) {
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= vocab)
      throw ConfigError(fmt::format("--prompt-ids: {} is not a token id of this model (0..{})", e.dump(), vocab - 1));
    ids.push_back(e.get<int64_t>());
  }
  return ids;
}

}  // namespace

int sample(int argc, char** argv) {
  cxxopts::Options opts("xsagpt sample", "Generate text from a checkpoint (GPT-2 BPE), with a key/value cache.");
  // clang-format off
  opts.add_options()
    ("checkpoint", "checkpoint file, or a run directory (its newest checkpoint)", cxxopts::value<std::string>())
    ("p,prompt", "prompt text", cxxopts::value<std::string>())
    ("prompt-ids", "prompt as token ids (1,2,3), no tokenizer needed", cxxopts::value<std::string>())
    ("n,max-new-tokens", "tokens to generate (at most 1048576)", cxxopts::value<int64_t>()->default_value("200"))
    ("t,temperature", "softmax temperature; 0 picks the most likely token", cxxopts::value<double>()->default_value("0.8"))
    ("k,top-k", "sample among the k most likely tokens (0: all)", cxxopts::value<int64_t>()->default_value("200"))
    ("s,seed", "random seed", cxxopts::value<uint64_t>()->default_value("1337"))
    ("ids", "print the generated token ids as a JSON array instead of text")
    ("vocab-limit", "never produce ids >= this (default: GPT-2's 50257, or a compact vocabulary's size, when text is encoded or decoded, else none)",
     cxxopts::value<int64_t>())
    ("no-cache", "recompute the whole context for every token (slow; for checking the cache)")
    ("vocab", "directory with encoder.json and vocab.bpe (default: $XSAGPT_GPT2_VOCAB, else data/gpt2/)",
     cxxopts::value<std::string>());
  // clang-format on
  add_device_options(opts);
  const auto parsed = parse_checkpoint_command(opts, argc, argv);
  if (!parsed) return 0;
  const auto& args = *parsed;
  if (args.count("prompt") == args.count("prompt-ids"))
    throw ConfigError("give the prompt either as text (--prompt) or as token ids (--prompt-ids)");

  setup_threads(args);
  SampleOptions so;
  so.max_new_tokens = args["max-new-tokens"].as<int64_t>();
  so.temperature = args["temperature"].as<double>();
  so.top_k = args["top-k"].as<int64_t>();
  so.seed = args["seed"].as<uint64_t>();
  so.use_cache = !args.count("no-cache");
  if (so.max_new_tokens < 0 || so.max_new_tokens > kMaxNewTokens)
    throw ConfigError(fmt::format("--max-new-tokens: expected 0..{}, got {}", kMaxNewTokens, so.max_new_tokens));
  if (!(so.temperature >= 0) || !std::isfinite(so.temperature))
    throw ConfigError(fmt::format("--temperature: expected 0 (greedy) or a finite number > 0, got {}", so.temperature));
  if (so.top_k < 0) throw ConfigError("--top-k: must be >= 0 (0: no cut)");

  const bool text_out = !args.count("ids");
  const bool need_tokenizer = text_out || args.count("prompt");
  std::optional<Gpt2Tokenizer> tok;
  if (need_tokenizer) tok = Gpt2Tokenizer::load(args.count("vocab") ? args["vocab"].as<std::string>() : "");
  auto trained = load_trained_model(args["checkpoint"].as<std::string>(), device_option(args));
  const int64_t V = trained.model->cfg.vocab_size;
  if (tok && trained.vocab.compact()) tok->use_compact(trained.vocab.gpt2_ids, trained.vocab.rest_marker);
  if (tok) {
    // The text's ids, through the tokenizer, against the model's (data/vocab.h: the one check).
    try {
      check_model_input(trained.vocab, V, trained.file.string(), trained.vocab, "text through GPT-2's BPE",
                        tok->vocab_size());
    } catch (const DataError& e) {
      throw ConfigError(fmt::format("{}; use --prompt-ids and --ids", e.what()));
    }
    so.vocab_limit = tok->vocab_size();  // the padding rows beyond 50257 are no tokens
  }
  if (args.count("vocab-limit")) {
    so.vocab_limit = args["vocab-limit"].as<int64_t>();
    if (so.vocab_limit < 1 || so.vocab_limit > V || (tok && so.vocab_limit > tok->vocab_size()))
      throw ConfigError(
          fmt::format("--vocab-limit: expected 1..{}, got {}", tok ? tok->vocab_size() : V, so.vocab_limit));
  }

  std::vector<int64_t> prompt;
  if (args.count("prompt")) {
    std::vector<int32_t> ids;
    try {
      ids = tok->encode(args["prompt"].as<std::string>());
    } catch (const std::invalid_argument& e) {
      throw ConfigError(std::string("--prompt: ") + e.what());
    }
    prompt.assign(ids.begin(), ids.end());
    if (prompt.empty()) throw ConfigError("--prompt: empty; give at least one character");
  } else {
    prompt = parse_prompt_ids(args["prompt-ids"].as<std::string>(), V);
    if (prompt.empty()) throw ConfigError("--prompt-ids: give at least one token id");
  }

  spdlog::info("{} (step {}): {} prompt tokens, {} new, temperature {}, top-k {}, seed {}{}", trained.file.string(),
               trained.step, prompt.size(), so.max_new_tokens, so.temperature, so.top_k, so.seed,
               so.use_cache ? "" : ", no cache");
  if (!text_out) {
    auto ids = generate(trained.model, prompt, so);
    std::cout << json(ids).dump() << "\n";
    return 0;
  }
  utf8::StreamDecoder decoder;
  if (args.count("prompt"))
    std::cout << args["prompt"].as<std::string>();
  else {
    std::vector<int32_t> p(prompt.begin(), prompt.end());
    std::cout << tok->decode(p);
  }
  std::cout.flush();
  generate(trained.model, prompt, so,
           [&](int64_t id) { std::cout << decoder.push(tok->token_bytes(static_cast<int32_t>(id))) << std::flush; });
  std::cout << decoder.finish() << "\n";
  return 0;
}

}  // namespace xsagpt::cli
