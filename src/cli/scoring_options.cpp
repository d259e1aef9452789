#include "cli/scoring_options.h"

#include "config/runtime.h"
#include "config/schema.h"
#include "data/vocab.h"
#include "util/device.h"

#include <fmt/format.h>

namespace xsagpt::cli {

void add_scoring_options(cxxopts::Options& opts) {
  // clang-format off
  opts.add_options()
    ("b,batch-tokens", "tokens per forward pass (0: 16384 on a GPU, 4096 on the CPU)",
     cxxopts::value<int64_t>()->default_value("0"))
    ("precision", "auto (bf16 autocast on CUDA, fp32 on the CPU), bf16 or fp32",
     cxxopts::value<std::string>()->default_value("auto"))
    ("vocab", "directory with encoder.json and vocab.bpe (default: $XSAGPT_GPT2_VOCAB, else data/gpt2/)",
     cxxopts::value<std::string>());
  // clang-format on
  add_device_options(opts);
}

ScoringArgs read_scoring_options(const cxxopts::ParseResult& args) {
  ScoringArgs s;
  s.score.batch_tokens = args["batch-tokens"].as<int64_t>();
  if (s.score.batch_tokens < 0) throw ConfigError("--batch-tokens: must be >= 0 (0: the default)");
  s.precision = args["precision"].as<std::string>();
  parse_precision(s.precision, /*cuda=*/false, "--precision");  // checked now; applied once the device is known
  s.device = args["device"].as<std::string>();
  check_device_spec(s.device, "--device");
  if (args.count("vocab")) s.vocab = args["vocab"].as<std::string>();
  setup_threads(args);
  return s;
}

TrainedModel load_gpt2_model(const std::string& checkpoint, torch::Device device, Gpt2Tokenizer& tok,
                             const std::string& precision, bool compact_ok) {
  auto trained = load_trained_model(checkpoint, device);
  Runtime rt;  // ATen ops, as the scores were always taken
  rt.bf16 = parse_precision(precision, device.is_cuda(), "--precision");
  trained.model->set_runtime(rt);
  // Text reaches the model through the tokenizer, mapped to the model's compact ids where
  // the requests allow it (score's text; not eval's GPT-2 ids); then the one check of
  // data/vocab.h, as every reader makes it.
  const bool mapped = trained.vocab.compact() && compact_ok;
  if (mapped) tok.use_compact(trained.vocab.gpt2_ids, trained.vocab.rest_marker);
  try {
    check_model_input(trained.vocab, trained.model->cfg.vocab_size, trained.file.string(),
                      mapped ? trained.vocab : ShardVocab{},
                      mapped ? "these requests, mapped through it" : "these requests (GPT-2 tokens; score and sample "
                                                                     "read compact ids)",
                      tok.vocab_size());
  } catch (const DataError& e) {
    throw ConfigError(e.what());
  }
  return trained;
}

}  // namespace xsagpt::cli
