// cxxopts as every command uses it, and the start-up every command shares.
//
// cxxopts splits the values of list options at commas; `--set` values hold commas
// of their own (data.train's glob lists, train.kernels' kernel lists), so here a
// value is never split: a list option is given once per item. Every file includes
// cxxopts through this header, so the library's templates see one delimiter.
#pragma once

#define CXXOPTS_VECTOR_DELIMITER '\0'
#include <torch/types.h>
#include <cxxopts.hpp>

#include <filesystem>
#include <optional>
#include <string>

namespace xsagpt::cli {

// Adds -h/--help and parses. Prints the help and returns nullopt when it was
// asked for (the command then exits 0); an argument no option takes is a
// ConfigError naming it.
std::optional<cxxopts::ParseResult> parse_command(cxxopts::Options& opts, int argc, char** argv);

// parse_command for a command that reads one checkpoint: its first positional
// argument (or --checkpoint), a checkpoint file or a run directory, is required.
// The command declares the "checkpoint" option itself (its help says what it reads).
std::optional<cxxopts::ParseResult> parse_checkpoint_command(cxxopts::Options& opts, int argc, char** argv);

// --device (auto, cpu, cuda or cuda:N) and --threads (CPU intra-op threads).
void add_device_options(cxxopts::Options& opts);
// Checks --threads and sets LibTorch's CPU threads from it (ConfigError naming the flag).
void setup_threads(const cxxopts::ParseResult& args);
// --device resolved to a device of this machine (ConfigError naming the flag).
torch::Device device_option(const cxxopts::ParseResult& args);

// The command line that mirrors a run or sweep directory live into TensorBoard
// (scripts/view/track.py, into tb/ beside the directory), which `train` and `sweep` print
// at start so that watching a run needs no reading up.
std::string track_command(const std::filesystem::path& dir);

}  // namespace xsagpt::cli
