#include "cli/commands.h"

namespace xsagpt::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> all{
      {"info", "parameter counts, FLOPs per token and a memory estimate for a config", info},
      {"config", "print the configuration reference (every key, default, meaning)", config_reference},
      {"tokenize", "GPT-2 token ids of a text as JSON, or the text of ids (--decode)", tokenize},
  };
  return all;
}

}  // namespace xsagpt::cli
