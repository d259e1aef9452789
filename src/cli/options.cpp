#include "cli/options.h"

#include "util/device.h"
#include "util/error.h"
#include "util/paths.h"
#include "util/spawn.h"

#include <iostream>

namespace xsagpt::cli {

std::optional<cxxopts::ParseResult> parse_command(cxxopts::Options& opts, int argc, char** argv) {
  opts.add_options()("h,help", "show this help");
  auto args = opts.parse(argc, argv);
  if (args.count("help")) {
    std::cout << opts.help() << "\n";
    return std::nullopt;
  }
  if (!args.unmatched().empty()) throw ConfigError("unexpected argument '" + args.unmatched()[0] + "'");
  return args;
}

std::optional<cxxopts::ParseResult> parse_checkpoint_command(cxxopts::Options& opts, int argc, char** argv) {
  opts.parse_positional({"checkpoint"});
  opts.positional_help("CHECKPOINT");
  auto args = parse_command(opts, argc, argv);
  if (args && !args->count("checkpoint"))
    throw ConfigError("--checkpoint: required (a checkpoint file or a run directory)");
  return args;
}

void add_device_options(cxxopts::Options& opts) {
  // clang-format off
  opts.add_options()
    ("device", "auto, cpu, cuda or cuda:N", cxxopts::value<std::string>()->default_value("auto"))
    ("threads", "CPU intra-op threads, at most 1024 (0: LibTorch's default, one per physical core; above the "
     "machine's logical cores: capped to them)",
     cxxopts::value<int>()->default_value("0"));
  // clang-format on
}

void setup_threads(const cxxopts::ParseResult& args) { setup_cpu_threads(args["threads"].as<int>(), "--threads"); }

torch::Device device_option(const cxxopts::ParseResult& args) {
  return resolve_device(args["device"].as<std::string>(), "--device");
}

std::string track_command(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  const auto root = project_root();
  const fs::path python =
      root && fs::exists(*root / ".venv/bin/python") ? *root / ".venv/bin/python" : fs::path("python3");
  const fs::path script = root ? *root / "scripts/view/track.py" : fs::path("scripts/view/track.py");
  const fs::path tb = (dir.has_parent_path() ? dir.parent_path() : fs::path(".")) / "tb";
  return shell_quote(python.string()) + " " + shell_quote(script.string()) + " " + shell_quote(dir.string()) +
         " --tensorboard " + shell_quote(tb.string());
}

}  // namespace xsagpt::cli
