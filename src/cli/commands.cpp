#include "cli/commands.h"

namespace xsagpt::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> all{
      {"train", "train a model (SA or XSA) from a run config; resumable", train},
      {"sweep",
       "run named variants x a grid (or a ladder of sizes); each variant vs the baseline, paired by seed; restartable; --point: one point, processes side by side; --status; --summarize",
       sweep},
      {"info", "parameter counts, FLOPs per token and a memory estimate for a config", info},
      {"config", "print the configuration reference (every key, default, meaning)", config_reference},
      {"data", "check token shards and print their counts (and first tokens) as JSON", data},
      {"bench-data", "tokens per second the data loader delivers on this CPU", bench_data},
      {"analyze", "attention statistics per layer (figure 1), or --positions: val loss by token position", analyze},
      {"bench", "time and memory of a block and a training step, XSA vs SA (the paper's figure 2)", bench},
      {"sample", "generate text from a checkpoint (temperature, top-k, key/value cache)", sample},
      {"score", "log-likelihoods of texts as lm-evaluation-harness splits them (JSON lines in and out)", score},
      {"eval", "multiple-choice accuracy (acc, acc_norm) on local task files; variants vs a baseline", eval},
      {"tokenize", "GPT-2 token ids of a text as JSON, or the text of ids (--decode)", tokenize},
  };
  return all;
}

}  // namespace xsagpt::cli
