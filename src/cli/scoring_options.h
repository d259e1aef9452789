// The options `score` and `eval` share, one definition for both: how a checkpoint
// is scored (tokens per pass, precision), with which GPT-2 vocabulary, on which
// device and with how many CPU threads; and the check that a checkpoint was
// trained on GPT-2 tokens before its log-probabilities are taken as such.
#pragma once

#include "cli/options.h"
#include "eval/scorer.h"
#include "run/from_checkpoint.h"
#include "tokenizer/gpt2_bpe.h"

#include <string>

namespace xsagpt::cli {

void add_scoring_options(cxxopts::Options& opts);

struct ScoringArgs {
  eval::ScoreOptions score;
  std::string device;     // as given; resolved by the command once its input is checked
  std::string precision;  // --precision as given (checked): the loaded model's runtime computes in it
  std::string vocab;      // empty: $XSAGPT_GPT2_VOCAB, else data/gpt2/
};

// Validates the shared options (ConfigError naming the flag) and sets the CPU threads.
ScoringArgs read_scoring_options(const cxxopts::ParseResult& args);

// load_trained_model; the model runs in `precision` (config/runtime.h: auto, bf16 or
// fp32) on `device`. A model trained on a compact vocabulary (its checkpoint's vocab,
// data/vocab.h) renumbers `tok` to it when compact_ok, and is refused otherwise (eval's
// requests are GPT-2 ids made before any model is read); a model of GPT-2 ids whose
// vocabulary is smaller than GPT-2's is refused.
TrainedModel load_gpt2_model(const std::string& checkpoint, torch::Device device, Gpt2Tokenizer& tok,
                             const std::string& precision, bool compact_ok);

}  // namespace xsagpt::cli
