// The background prefetcher hands out exactly the loader's batches, and its
// state() is the position of the next batch handed out (what a checkpoint needs).
#include "data/prefetch.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

using namespace xsagpt;
namespace fs = std::filesystem;

namespace {
fs::path write_shards() {
  auto dir = fs::temp_directory_path() / "xsagpt_prefetch_test";
  fs::create_directories(dir);
  for (int s = 0; s < 2; ++s) {
    std::vector<int32_t> header(256, 0);
    const int32_t n = 1000 + 200 * s;
    header[0] = 20240520;
    header[1] = 1;
    header[2] = n;
    std::vector<uint16_t> tokens(n);
    for (int32_t i = 0; i < n; ++i) tokens[i] = static_cast<uint16_t>((i * 7 + s * 13) % 256);
    std::ofstream f(dir / ("train_00000" + std::to_string(s) + ".bin"), std::ios::binary);
    f.write(reinterpret_cast<const char*>(header.data()), 1024);
    f.write(reinterpret_cast<const char*>(tokens.data()), 2 * n);
  }
  return dir;
}
}  // namespace

TEST(Prefetch, SameBatchesAndResumableState) {
  const auto dir = write_shards();
  LoaderOptions o;
  o.pattern = (dir / "train_*.bin").string();
  o.batch_size = 3;
  o.seq_len = 16;
  o.vocab_size = 256;
  DataLoader plain(o), wrapped(o);
  std::vector<LoaderState> states;
  {
    PrefetchingLoader pre(wrapped, 2);
    for (int i = 0; i < 60; ++i) {  // crosses shard and epoch boundaries
      EXPECT_EQ(pre.state().to_json(), plain.state().to_json()) << "batch " << i;
      auto [px, py] = plain.next();
      auto [x, y] = pre.next();
      ASSERT_TRUE(torch::equal(x, px)) << "batch " << i;
      ASSERT_TRUE(torch::equal(y, py)) << "batch " << i;
    }
    states.push_back(pre.state());
  }
  // A fresh loader restored from that state continues where the plain one is.
  DataLoader restored(o);
  restored.load_state(states.back());
  EXPECT_TRUE(torch::equal(restored.next().first, plain.next().first));
}
