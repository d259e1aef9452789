// xsagpt: train and compare GPT models with standard (SA) or exclusive (XSA)
// self attention. This file only dispatches to the subcommands in src/cli/.
#include "cli/commands.h"
#include "config/schema.h"
#include "util/device.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <iostream>

namespace {

void usage(std::ostream& out) {
  out << "usage: xsagpt <command> [options]   (xsagpt <command> --help for its options)\n\ncommands:\n";
  for (const auto& c : xsagpt::cli::commands())
    out << "  " << c.name << std::string(std::max<size_t>(12, std::strlen(c.name) + 2) - std::strlen(c.name), ' ')
        << c.summary << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage(argc < 2 ? std::cerr : std::cout);
    return argc < 2 ? 2 : 0;
  }
  // The commands that compute with LibTorch on the CPU start OpenMP with xsagpt's
  // wait defaults; this may execute the program again (util/device.h).
  for (const char* computing : {"train", "sweep", "bench", "analyze", "sample", "score", "eval"})
    if (!std::strcmp(argv[1], computing)) xsagpt::apply_openmp_defaults(argv);
  // Logs go to stderr; stdout carries only what a command outputs (tables, JSON).
  spdlog::set_default_logger(spdlog::stderr_color_mt("xsagpt"));
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S] [%^%l%$] %v");
  for (const auto& c : xsagpt::cli::commands()) {
    if (std::strcmp(argv[1], c.name) != 0) continue;
    try {
      return c.run(argc - 1, argv + 1);
    } catch (const xsagpt::ConfigError& e) {
      spdlog::error("{}", e.what());
      return 2;
    } catch (const c10::Error& e) {
      spdlog::error("{}", e.what_without_backtrace());
      return 1;
    } catch (const std::exception& e) {
      spdlog::error("{}", e.what());
      return 1;
    }
  }
  std::cerr << "xsagpt: unknown command '" << argv[1] << "'\n";
  usage(std::cerr);
  return 2;
}
