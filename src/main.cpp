// xsagpt: train and compare GPT models with standard (SA) or exclusive (XSA)
// self attention. This file only dispatches to the subcommands in src/cli/.
#include "cli/commands.h"
#include "config/schema.h"
#include "train/signals.h"
#include "util/device.h"
#include "util/test_stop.h"

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
  // The commands a signal stops with a checkpoint catch it from here on (train/signals.h):
  // blocked now, so that one arriving before the handlers (or across the exec below) waits
  // for them instead of killing the process.
  const bool stoppable = !std::strcmp(argv[1], "train") || !std::strcmp(argv[1], "sweep");
  if (stoppable) xsagpt::block_stop_signals();
  // The commands that compute with LibTorch on the CPU start OpenMP with xsagpt's
  // wait defaults; this may execute the program again (util/device.h).
  for (const char* computing : {"train", "sweep", "bench", "analyze", "sample", "score", "eval"})
    if (!std::strcmp(argv[1], computing)) xsagpt::apply_openmp_defaults(argv);
  if (stoppable) {
    xsagpt::stop_here_for_tests("main:stop-signals-blocked");  // a test signals it here, before the handlers
    xsagpt::install_stop_handlers();
  }
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
