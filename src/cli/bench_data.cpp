// `xsagpt bench-data`: how many tokens per second one rank's DataLoader delivers on
// the CPU, to show it is never what limits a GPU run. Reads real shards, or writes
// synthetic llm.c shards of random GPT-2 ids (FineWeb-sized if asked) to a temporary
// folder first. Shards just written or read sit in the page cache, so this measures
// the loader, not the disk.
#include "cli/commands.h"
#include "cli/options.h"
#include "config/schema.h"
#include "data/loader.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include <unistd.h>

namespace xsagpt::cli {

namespace {

namespace fs = std::filesystem;

// Writes `n` llm.c shards of `tokens` random ids each; returns their glob pattern.
std::string write_synthetic(const fs::path& dir, int64_t n, int64_t tokens) {
  fs::create_directories(dir);
  std::mt19937_64 rng(0);
  std::uniform_int_distribution<int> id(0, 50256);
  std::vector<uint16_t> buf(static_cast<size_t>(tokens));
  for (int64_t s = 0; s < n; ++s) {
    for (auto& t : buf) t = static_cast<uint16_t>(id(rng));
    int32_t header[256] = {kLlmcMagic, kLlmcVersion, static_cast<int32_t>(tokens)};
    std::ofstream f(dir / fmt::format("train_{:06d}.bin", s), std::ios::binary);
    f.write(reinterpret_cast<const char*>(header), sizeof(header));
    f.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size() * 2));
    if (!f) throw DataError(fmt::format("{}: cannot write synthetic shard", dir.string()));
  }
  return (dir / "train_*.bin").string();
}

// Not fs::remove_all: libtorch.so exports a broken copy of it that wins at link time.
void remove_synthetic(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  for (const auto& f : files) fs::remove(f);
  fs::remove(dir);
}

}  // namespace

int bench_data(int argc, char** argv) {
  cxxopts::Options opts("xsagpt bench-data", "Tokens per second delivered by one rank's data loader.");
  // clang-format off
  opts.add_options()
    ("pattern", "shards to read", cxxopts::value<std::string>()->default_value("data/kjv/shards/train_*.bin"))
    ("synthetic-tokens", "instead, write this many random tokens per synthetic shard to a temporary folder",
     cxxopts::value<int64_t>())
    ("synthetic-shards", "number of synthetic shards", cxxopts::value<int64_t>()->default_value("4"))
    ("b,batch-size", "sequences per rank per batch", cxxopts::value<int64_t>()->default_value("8"))
    ("t,seq-len", "sequence length", cxxopts::value<int64_t>()->default_value("1024"))
    ("world-size", "ranks sharing the stream (this process is rank 0)", cxxopts::value<int64_t>()->default_value("1"))
    ("no-shuffle", "read in file order")
    ("seconds", "how long to measure", cxxopts::value<double>()->default_value("3"))
    ("json", "print JSON");
  // clang-format on
  const auto parsed = parse_command(opts, argc, argv);
  if (!parsed) return 0;
  const auto& args = *parsed;
  const double seconds = args["seconds"].as<double>();
  if (seconds <= 0) throw ConfigError("--seconds: must be > 0");

  LoaderOptions lo;
  lo.batch_size = args["batch-size"].as<int64_t>();
  lo.seq_len = args["seq-len"].as<int64_t>();
  lo.world_size = args["world-size"].as<int64_t>();
  lo.shuffle = !args.count("no-shuffle");
  lo.pattern = args["pattern"].as<std::string>();
  fs::path tmp;
  if (args.count("synthetic-tokens")) {
    const int64_t n = args["synthetic-shards"].as<int64_t>(), tokens = args["synthetic-tokens"].as<int64_t>();
    if (n <= 0 || tokens <= lo.seq_len || tokens > INT32_MAX)
      throw ConfigError("--synthetic-shards must be > 0 and --synthetic-tokens in (seq_len, 2^31)");
    tmp = fs::temp_directory_path() / fmt::format("xsagpt-bench-data-{}", ::getpid());
    lo.pattern = write_synthetic(tmp, n, tokens);
  }

  using clock = std::chrono::steady_clock;
  int64_t batches = 0;
  double elapsed = 0, first_ms = 0;
  int64_t shards = 0, shard_tokens = 0;
  try {
    const auto t0 = clock::now();
    DataLoader loader(lo);
    loader.next();
    first_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    shards = static_cast<int64_t>(loader.shards().size());
    shard_tokens = loader.tokens_in_shards();
    const auto t1 = clock::now();
    int64_t sink = 0;
    do {
      for (int i = 0; i < 16; ++i, ++batches) sink += loader.next().first.data_ptr<int64_t>()[0];
      elapsed = std::chrono::duration<double>(clock::now() - t1).count();
    } while (elapsed < seconds);
    if (sink < 0) std::cout << "";  // keeps the batches observable
  } catch (...) {
    if (!tmp.empty()) remove_synthetic(tmp);
    throw;
  }
  if (!tmp.empty()) remove_synthetic(tmp);

  const double tokens = static_cast<double>(batches * lo.batch_size * lo.seq_len);
  const json j = {{"pattern", args.count("synthetic-tokens") ? "synthetic" : lo.pattern},
                  {"shards", shards},
                  {"tokens_in_shards", shard_tokens},
                  {"batch_size", lo.batch_size},
                  {"seq_len", lo.seq_len},
                  {"world_size", lo.world_size},
                  {"shuffle", lo.shuffle},
                  {"batches", batches},
                  {"seconds", elapsed},
                  {"tokens_per_second", tokens / elapsed},
                  {"first_batch_ms", first_ms}};
  if (args.count("json")) {
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << fmt::format(
        "{:.1f}M tokens/s ({:.0f} batches/s of {} x {}, shuffle {}, {} shards, {} tokens); "
        "first batch after {:.1f} ms\n",
        tokens / elapsed / 1e6, batches / elapsed, lo.batch_size, lo.seq_len, lo.shuffle ? "on" : "off", shards,
        shard_tokens, first_ms);
  }
  return 0;
}

}  // namespace xsagpt::cli
