// Shard reading and the data loader, against shards written here byte by byte
// (an independent writer) and a stream order recomputed from loader.h's definition.
#include "data/loader.h"

#include "helpers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

using namespace xsagpt;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

// A namespace of this file's own, not an anonymous one: its fixture is the base of the
// TEST_F classes, which have external linkage (GCC's -Wsubobject-linkage).
namespace test_data {

using Tokens = std::vector<uint16_t>;

struct LlmcHeader {
  int32_t magic = 20240520, version = 1;
  int64_t count = -1;  // -1: the real count
};

void write_llmc(const fs::path& p, const Tokens& t, LlmcHeader h = {}, int64_t drop_bytes = 0) {
  std::vector<int32_t> header(256, 0);
  header[0] = h.magic;
  header[1] = h.version;
  header[2] = static_cast<int32_t>(h.count < 0 ? static_cast<int64_t>(t.size()) : h.count);
  std::string bytes(reinterpret_cast<const char*>(header.data()), 1024);
  bytes.append(reinterpret_cast<const char*>(t.data()), t.size() * 2);
  std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()) - drop_bytes);
}

void write_raw(const fs::path& p, const Tokens& t) {
  std::ofstream(p, std::ios::binary)
      .write(reinterpret_cast<const char*>(t.data()), static_cast<std::streamsize>(t.size() * 2));
}

// Tokens that say where they are: every token in a test's shards is distinct.
Tokens ramp(int64_t n, int64_t first) {
  Tokens t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = static_cast<uint16_t>(first + i);
  return t;
}

std::vector<int64_t> row(const torch::Tensor& t, int64_t b) {
  auto r = t[b].contiguous();
  return {r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + r.numel()};
}

template <class F>
std::string data_error_of(F&& f) {
  return test::error_of<DataError>(f);
}

class Data : public test::TempDirTest {
 protected:
  void SetUp() override {
    test::TempDirTest::SetUp();
    dir = tmp;
  }
  std::string path(const std::string& name) const { return (dir / name).string(); }

  // Three shards of different lengths (one raw), all token ids distinct.
  // T=8: 41 tokens -> 5 sequences, 30 -> 3, 57 -> 7: 15 sequences per epoch.
  void three_shards() {
    files = {ramp(41, 1000), ramp(30, 2000), ramp(57, 3000)};
    write_llmc(dir / "train_000.bin", files[0]);
    write_raw(dir / "train_001.bin", files[1]);
    write_llmc(dir / "train_002.bin", files[2]);
  }
  LoaderOptions opts(int64_t B = 3, int64_t T = 8) const {
    LoaderOptions o;
    o.pattern = path("train_*.bin");
    o.batch_size = B;
    o.seq_len = T;
    return o;
  }
  // Sequence s of file f under the definition in loader.h.
  std::vector<int64_t> sequence(size_t f, int64_t s, int64_t T, int64_t shift) const {
    return {files[f].begin() + s * T + shift, files[f].begin() + s * T + shift + T};
  }

  fs::path dir;
  std::vector<Tokens> files;
};

// Rows of `n` batches, flattened, identified by their first input token.
std::vector<int64_t> first_tokens(DataLoader& l, int64_t n) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) {
    auto [x, y] = l.next();
    for (int64_t b = 0; b < x.size(0); ++b) out.push_back(x[b][0].item<int64_t>());
  }
  return out;
}

}  // namespace test_data
using namespace test_data;

TEST_F(Data, DetectsLlmcAndRawFormats) {
  const Tokens t = ramp(100, 7);
  write_llmc(dir / "a.bin", t);
  write_raw(dir / "b.bin", t);
  const auto a = inspect_shard(path("a.bin")), b = inspect_shard(path("b.bin"));
  EXPECT_EQ(a.format, ShardFormat::kLlmC);
  EXPECT_EQ(a.header_bytes, 1024);
  EXPECT_EQ(a.num_tokens, 100);
  EXPECT_EQ(b.format, ShardFormat::kRaw);
  EXPECT_EQ(b.header_bytes, 0);
  EXPECT_EQ(b.num_tokens, 100);
  for (const auto& info : {a, b}) {
    MappedShard m(info);
    EXPECT_EQ(Tokens(m.tokens(), m.tokens() + m.num_tokens()), t) << info.path;
  }
}

TEST_F(Data, EveryMalformedFileHasItsOwnError) {
  const Tokens t = ramp(64, 0);
  write_llmc(dir / "magic.bin", t, {.magic = 20240521});
  write_llmc(dir / "version.bin", t, {.version = 2});
  write_llmc(dir / "truncated.bin", t, {}, 6);
  write_llmc(dir / "count.bin", t, {.count = 65});
  std::ofstream(dir / "header.bin", std::ios::binary).write("\x88\xd8\x34\x01\x01\x00\x00\x00", 8);  // magic, 1
  write_raw(dir / "odd.bin", t);
  fs::resize_file(dir / "odd.bin", 127);

  EXPECT_THAT(data_error_of([&] { inspect_shard(path("magic.bin")); }),
              HasSubstr(path("magic.bin") + ": wrong magic 20240521 in an llm.c-style header (expected 20240520)"));
  EXPECT_THAT(data_error_of([&] { inspect_shard(path("version.bin")); }),
              HasSubstr(path("version.bin") + ": unsupported llm.c shard version 2 (expected 1"));
  EXPECT_THAT(data_error_of([&] { inspect_shard(path("truncated.bin")); }),
              HasSubstr(path("truncated.bin") + ": size 1146 bytes does not match the header's token count 64 "
                                                "(expected 1024 + 2*64 = 1152 bytes): truncated"));
  EXPECT_THAT(data_error_of([&] { inspect_shard(path("count.bin")); }), HasSubstr("token count 65"));
  EXPECT_THAT(data_error_of([&] { inspect_shard(path("header.bin")); }),
              HasSubstr(path("header.bin") + ": llm.c shard truncated: 8 bytes, shorter than its 1024-byte header"));
  EXPECT_THAT(data_error_of([&] { inspect_shard(path("odd.bin")); }),
              HasSubstr(path("odd.bin") + ": not a token shard"));
  EXPECT_THAT(data_error_of([&] { inspect_shard(path("missing.bin")); }),
              HasSubstr(path("missing.bin") + ": cannot open"));

  EXPECT_THAT(data_error_of([&] { expand_patterns(path("nothing_*.bin")); }),
              HasSubstr("data pattern '" + path("nothing_*.bin") + "' matched no files"));
  EXPECT_THAT(data_error_of([&] { expand_patterns(path("magic.bin") + "," + path("nothing_*.bin")); }),
              HasSubstr("matched no files"));
  // A pattern that matches only a FIFO or a folder says so, instead of "no files".
  ASSERT_EQ(::mkfifo(path("pipe_0.bin").c_str(), 0600), 0);
  EXPECT_THAT(data_error_of([&] { expand_patterns(path("pipe_*.bin")); }),
              HasSubstr("matched no regular file: '" + path("pipe_0.bin") + "' is a FIFO (named pipe)"));
  fs::create_directory(dir / "folder_0.bin");
  EXPECT_THAT(data_error_of([&] { expand_patterns(path("folder_*.bin")); }), HasSubstr("is a directory"));

  write_llmc(dir / "short.bin", ramp(8, 0));
  LoaderOptions o;
  o.pattern = path("short.bin");
  o.seq_len = 8;  // needs 9 tokens
  EXPECT_THAT(data_error_of([&] { DataLoader l(o); }),
              HasSubstr(path("short.bin") + ": 8 tokens is too short for one sequence of seq_len 8 (needs 9 tokens)"));
  EXPECT_THAT(data_error_of([&] { ValidationSet v(o, 0); }), HasSubstr("too short for one sequence"));
}

TEST_F(Data, TokenIdsBeyondTheVocabularyAreReportedWithTheirOffset) {
  Tokens t = ramp(33, 0);
  t[21] = 50304;
  write_llmc(dir / "train_0.bin", t);
  LoaderOptions o;
  o.pattern = path("train_0.bin");
  o.seq_len = 8;
  o.batch_size = 1;
  o.shuffle = false;
  DataLoader l(o);
  l.next();
  l.next();  // tokens 0..16
  EXPECT_THAT(
      data_error_of([&] { l.next(); }),
      HasSubstr(path("train_0.bin") + ": token id 50304 at token offset 21 (byte 1066) is >= vocab_size 50304"));
  o.vocab_size = 50305;  // the same id is fine for a larger vocabulary
  DataLoader ok(o);
  for (int i = 0; i < 4; ++i) EXPECT_NO_THROW(ok.next());
  o.vocab_size = 50304;
  ValidationSet v(o, 0);
  EXPECT_THAT(data_error_of([&] { v.batch(2); }), HasSubstr("token id 50304 at token offset 21"));
}

TEST_F(Data, BadOptionsAreNamed) {
  three_shards();
  auto o = opts();
  o.rank = 2;
  o.world_size = 2;
  EXPECT_THAT(data_error_of([&] { DataLoader l(o); }), HasSubstr("rank must be in [0, 2) (world_size), got 2"));
  o = opts(0);
  EXPECT_THAT(data_error_of([&] { DataLoader l(o); }), HasSubstr("batch_size must be > 0"));
  o = opts(3, 0);
  EXPECT_THAT(data_error_of([&] { DataLoader l(o); }), HasSubstr("seq_len must be > 0"));
}

TEST_F(Data, UnshuffledBatchesAreTheFilesSequencesWithShiftedTargets) {
  three_shards();
  auto o = opts(4, 8);
  o.shuffle = false;
  DataLoader l(o);
  EXPECT_EQ(l.tokens_in_shards(), 41 + 30 + 57);
  EXPECT_EQ(l.sequences_per_epoch(), 15);
  // Stream: file 0 seq 0..4, file 1 seq 0..2, file 2 seq 0..6, then again.
  std::vector<std::pair<size_t, int64_t>> stream;
  for (int epoch = 0; epoch < 3; ++epoch)
    for (size_t f = 0; f < 3; ++f)
      for (int64_t s = 0; s < (static_cast<int64_t>(files[f].size()) - 1) / 8; ++s) stream.emplace_back(f, s);
  for (size_t k = 0; k < 10; ++k) {  // 40 sequences: across every shard and two epoch boundaries
    auto [x, y] = l.next();
    ASSERT_EQ(x.sizes(), (std::vector<int64_t>{4, 8}));
    ASSERT_EQ(x.dtype(), torch::kLong);
    for (int64_t b = 0; b < 4; ++b) {
      const auto [f, s] = stream[k * 4 + static_cast<size_t>(b)];
      EXPECT_EQ(row(x, b), sequence(f, s, 8, 0)) << "batch " << k << " row " << b;
      EXPECT_EQ(row(y, b), sequence(f, s, 8, 1)) << "batch " << k << " row " << b;
    }
  }
}

TEST_F(Data, SeveralPatternsKeepTheirOrderAndListAFileOnce) {
  three_shards();
  LoaderOptions o = opts(1, 8);
  o.shuffle = false;
  o.pattern = path("train_002.bin") + "," + path("train_*.bin");
  DataLoader l(o);
  ASSERT_EQ(l.shards().size(), 3u);
  EXPECT_EQ(l.shards()[0].path, path("train_002.bin"));
  EXPECT_EQ(l.shards()[1].path, path("train_000.bin"));
  EXPECT_EQ(first_tokens(l, 1), std::vector<int64_t>{3000});
}

TEST_F(Data, ShuffledEpochsArePermutationsThatDifferFromEpochToEpoch) {
  three_shards();
  DataLoader l(opts(5, 8));  // 15 sequences per epoch: 3 batches
  std::set<int64_t> all;
  for (size_t f = 0; f < 3; ++f)
    for (int64_t s = 0; s < (static_cast<int64_t>(files[f].size()) - 1) / 8; ++s) all.insert(files[f][s * 8]);
  std::vector<std::vector<int64_t>> epochs;
  for (int e = 0; e < 4; ++e) {
    epochs.push_back(first_tokens(l, 3));
    EXPECT_EQ(std::set<int64_t>(epochs.back().begin(), epochs.back().end()), all) << "epoch " << e;
    EXPECT_EQ(epochs.back().size(), all.size());
  }
  std::set<std::vector<int64_t>> distinct(epochs.begin(), epochs.end());
  EXPECT_EQ(distinct.size(), epochs.size());
  // Within a shard the order is shuffled too, not only the shard order.
  for (const auto& e : epochs) {
    std::map<int64_t, std::vector<int64_t>> per_file;  // token ids are 1000*(file+1) + offset
    for (int64_t t : e) per_file[t / 1000].push_back(t);
    bool any_unsorted = false;
    for (const auto& [f, v] : per_file) any_unsorted |= !std::is_sorted(v.begin(), v.end());
    EXPECT_TRUE(any_unsorted) << "sequences within shards came in file order";
  }
}

TEST_F(Data, SameSeedSameBatchesOtherSeedOtherBatches) {
  three_shards();
  DataLoader a(opts()), b(opts());
  auto o = opts();
  o.seed = 1338;
  DataLoader c(o);
  const auto ta = first_tokens(a, 10), tb = first_tokens(b, 10), tc = first_tokens(c, 10);
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
}

TEST_F(Data, RanksAreDisjointCoverTheStreamAndAgreeOnTheState) {
  three_shards();
  const int64_t W = 3, B = 2;
  auto global = opts(B * W, 8);  // one rank taking whole global batches is the reference
  DataLoader ref(global);
  std::vector<DataLoader> ranks;
  for (int64_t r = 0; r < W; ++r) {
    auto o = opts(B, 8);
    o.rank = r;
    o.world_size = W;
    ranks.emplace_back(o);
  }
  std::vector<int64_t> seen;
  for (int k = 0; k < 5; ++k) {  // 30 sequences: two epochs
    auto [gx, gy] = ref.next();
    for (int64_t r = 0; r < W; ++r) {
      auto [x, y] = ranks[r].next();
      for (int64_t b = 0; b < B; ++b) {
        EXPECT_EQ(row(x, b), row(gx, r * B + b)) << "batch " << k << " rank " << r;
        EXPECT_EQ(row(y, b), row(gy, r * B + b));
        seen.push_back(x[b][0].item<int64_t>());
      }
      EXPECT_EQ(ranks[r].state().to_json(), ref.state().to_json());
    }
  }
  // Ranks are disjoint and cover everything: each epoch's 15 sequences come exactly once.
  for (int e = 0; e < 2; ++e) {
    std::set<int64_t> epoch(seen.begin() + e * 15, seen.begin() + e * 15 + 15);
    EXPECT_EQ(epoch.size(), 15u);
  }
}

TEST_F(Data, ResumeFromSavedStateGivesExactlyTheSameBatches) {
  three_shards();
  for (int64_t k : {0, 1, 2, 3, 4, 5, 7, 11}) {  // batches of 4 cross shard ends and epoch ends (15 per epoch)
    DataLoader a(opts(4, 8));
    for (int64_t i = 0; i < k; ++i) a.next();
    const std::string saved = a.state().to_json().dump();
    DataLoader b(opts(4, 8));
    b.load_state(LoaderState::from_json(json::parse(saved)));
    for (int i = 0; i < 12; ++i) {
      auto [ax, ay] = a.next();
      auto [bx, by] = b.next();
      ASSERT_TRUE(torch::equal(ax, bx)) << "after " << k << " batches, next batch " << i;
      ASSERT_TRUE(torch::equal(ay, by));
    }
  }
}

TEST_F(Data, StateFromJsonAndLoadStateRejectWhatDoesNotFit) {
  three_shards();
  auto in_order = opts();
  in_order.shuffle = false;
  DataLoader ordered(in_order);
  for (int i = 0; i < 2; ++i) ordered.next();
  EXPECT_EQ(ordered.state().to_json()["shard"], 1);  // 6 sequences read: 5 from file 0, one from file 1
  EXPECT_EQ(ordered.state().to_json()["sequence"], 1);
  for (int i = 0; i < 5; ++i) ordered.next();  // 21 = 15 + 6
  EXPECT_EQ(ordered.state().to_json()["epoch"], 1);
  EXPECT_EQ(ordered.state().to_json()["shard"], 1);

  DataLoader a(opts());
  a.next();
  const json s = a.state().to_json();

  EXPECT_THAT(data_error_of([&] {
                auto j = s;
                j.erase("epoch");
                LoaderState::from_json(j);
              }),
              HasSubstr("loader state: missing key 'epoch'"));
  EXPECT_THAT(data_error_of([&] {
                auto j = s;
                j["shard"] = "one";
                LoaderState::from_json(j);
              }),
              HasSubstr("loader state: key 'shard' has the wrong type"));

  auto load = [&](auto edit, LoaderOptions o) {
    json j = s;
    edit(j);
    return data_error_of([&] { DataLoader(o).load_state(LoaderState::from_json(j)); });
  };
  auto keep = [](json&) {};
  EXPECT_THAT(load(keep, opts(3, 4)), HasSubstr("saved with seq_len 8, this loader has 4"));
  auto other_seed = opts();
  other_seed.seed = 7;
  EXPECT_THAT(load(keep, other_seed), HasSubstr("saved with seed 1337, this loader has 7"));
  auto unshuffled = opts();
  unshuffled.shuffle = false;
  EXPECT_THAT(load(keep, unshuffled), HasSubstr("saved with shuffle=true"));
  EXPECT_THAT(load([](json& j) { j["sequence"] = 99; }, opts()), HasSubstr("sequence 99 is out of range"));
  EXPECT_THAT(load([](json& j) { j["shard"] = 3; }, opts()), HasSubstr("position epoch 0 shard 3 is out of range"));
  fs::remove(dir / "train_001.bin");
  EXPECT_THAT(load(keep, opts()), HasSubstr("saved over 3 shards holding 128 tokens"));
  write_raw(dir / "train_001.bin", ramp(31, 2000));  // same name, different length
  EXPECT_THAT(load(keep, opts()), HasSubstr("but '" + path("train_*.bin") + "' matches 3 shards holding 129 tokens"));
}

TEST_F(Data, OnlyTheCurrentShardIsMappedAndNoFilesStayOpen) {
  const int n = 200;
  for (int i = 0; i < n; ++i) write_llmc(dir / fmt::format("train_{:04d}.bin", i), ramp(17, i * 17));
  auto count = [&](const char* what) {
    int c = 0;
    if (std::string(what) == "fd") {
      for (const auto& e : fs::directory_iterator("/proc/self/fd"))
        c += fs::read_symlink(e.path()).string().find(dir.string()) == 0;
    } else {
      std::ifstream maps("/proc/self/maps");
      for (std::string line; std::getline(maps, line);) c += line.find(dir.string()) != std::string::npos;
    }
    return c;
  };
  DataLoader l(opts(3, 8));  // 2 sequences per shard
  EXPECT_EQ(l.shards().size(), static_cast<size_t>(n));
  EXPECT_EQ(count("maps"), 0);
  for (int k = 0; k < 2 * n / 3 + 5; ++k) {
    l.next();
    EXPECT_EQ(count("maps"), 1);
    EXPECT_EQ(count("fd"), 0);
  }
}

// A shard truncated on disk while mapped faults (SIGBUS) on the next read of the lost
// pages; the run must say which shard and what to do rather than die silently.
TEST_F(Data, ReadingATruncatedMappedShardNamesTheShard) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Tokens t = ramp(40000, 0);  // 80 KB: many pages
  write_llmc(dir / "train_000.bin", t);
  const auto shard = path("train_000.bin");
  EXPECT_EXIT(
      {
        MappedShard m(inspect_shard(shard));
        fs::resize_file(shard, 1024);  // keep the header, drop every token
        volatile uint16_t last = m.tokens()[m.num_tokens() - 1];
        (void)last;
        std::_Exit(0);  // not reached
      },
      ::testing::ExitedWithCode(1),  // the child's SetUp makes its own folder: match the file name
      "data shard /.*/train_000\\.bin: cannot read byte [0-9]+: the file was truncated");
  // Faults elsewhere still end the process as before.
  EXPECT_EXIT(
      {
        MappedShard m(inspect_shard(path("train_000.bin")));
        std::raise(SIGBUS);
      },
      ::testing::KilledBySignal(SIGBUS), "");
}

TEST_F(Data, ValidationSetIsTheFirstSequencesInOrderSplitAcrossRanks) {
  three_shards();
  auto o = opts(2, 8);
  o.shuffle = true;  // ignored
  // 7 sequences' worth of tokens: file 0 (5), then file 1 (2); 2 ranks x 2 -> one batch, 3 dropped.
  std::vector<std::vector<int64_t>> rows;
  for (int64_t r = 0; r < 2; ++r) {
    o.rank = r;
    o.world_size = 2;
    ValidationSet v(o, 7 * 8 + 5);
    ASSERT_EQ(v.num_batches(), 1);
    EXPECT_EQ(v.num_sequences(), 4);
    auto [x, y] = v.batch(0);
    auto [x2, y2] = v.batch(0);
    EXPECT_TRUE(torch::equal(x, x2));
    for (int64_t b = 0; b < 2; ++b) {
      EXPECT_EQ(row(y, b), sequence(0, r * 2 + b, 8, 1));
      rows.push_back(row(x, b));
    }
    EXPECT_THAT(data_error_of([&] { v.batch(1); }), HasSubstr("batch 1 out of range [0, 1)"));
  }
  for (int64_t s = 0; s < 4; ++s) EXPECT_EQ(rows[static_cast<size_t>(s)], sequence(0, s, 8, 0));

  // All of it (max_tokens <= 0): 15 sequences -> 3 batches of 1 x 5 ranks, crossing files in order.
  auto all = opts(1, 8);
  all.world_size = 5;
  all.rank = 4;
  ValidationSet v(all, 0);
  ASSERT_EQ(v.num_batches(), 3);
  EXPECT_EQ(row(v.batch(0).first, 0), sequence(0, 4, 8, 0));  // sequence 4 of the stream
  EXPECT_EQ(row(v.batch(1).first, 0), sequence(2, 1, 8, 0));  // 9: 5 in file 0, 3 in file 1, then file 2's second
  EXPECT_EQ(row(v.batch(2).first, 0), sequence(2, 6, 8, 0));  // 14

  auto big = opts(16, 8);
  EXPECT_THAT(data_error_of([&] { ValidationSet(big, 0); }),
              HasSubstr("gives 15 sequences of seq_len 8, fewer than one batch of batch_size 16 x world_size 1"));
  EXPECT_THAT(data_error_of([&] { ValidationSet(opts(), 7); }), HasSubstr("max_tokens 7 is less than one sequence"));
}

// A truncation that keeps the last page mapped reads zeros, not a fault: every read is
// checked against the size the shard had when it was opened.
TEST_F(Data, ATruncationInsideTheLastPageStopsTheReadNamingTheShard) {
  three_shards();
  ValidationSet v(opts(2, 8), 0);
  DataLoader l([&] {
    auto o = opts(2, 8);
    o.shuffle = false;
    return o;
  }());
  EXPECT_EQ(row(v.batch(0).first, 0), sequence(0, 0, 8, 0));
  l.next();
  fs::resize_file(dir / "train_000.bin", 1024 + 10);  // 5 tokens of 41 left, all in the first page
  EXPECT_THAT(data_error_of([&] { v.batch(0); }),
              HasSubstr(path("train_000.bin") + ": 1034 bytes now, 1106 when this run opened it"));
  EXPECT_THAT(data_error_of([&] { l.next(); }), HasSubstr(path("train_000.bin") + ": 1034 bytes now"));
}

TEST_F(Data, ValidationShardsAreCheckedAgainstWhatACheckpointSaw) {
  three_shards();
  const auto saved = ValidationSet(opts(1, 8), 0).identity();
  ASSERT_EQ(saved.size(), 3u);
  EXPECT_EQ(saved[1]["file"], "train_001.bin");
  EXPECT_EQ(saved[1]["tokens"], 30);
  EXPECT_NO_THROW(ValidationSet(opts(1, 8), 0).check_identity(saved));
  EXPECT_NO_THROW(ValidationSet(opts(1, 8), 0).check_identity(json::array()));  // older checkpoints
  write_raw(dir / "train_001.bin", ramp(30, 5000));                             // same size, other tokens
  EXPECT_THAT(data_error_of([&] { ValidationSet(opts(1, 8), 0).check_identity(saved); }),
              HasSubstr("validation shard " + path("train_001.bin") + " holds other tokens"));
  fs::remove(dir / "train_002.bin");
  EXPECT_THAT(data_error_of([&] { ValidationSet(opts(1, 8), 0).check_identity(saved); }),
              HasSubstr("saved over [\"train_000.bin\", \"train_001.bin\", \"train_002.bin\"]"));
}

TEST(DataPermutation, IsAPermutationAndDependsOnTheKey) {
  const auto p = permutation(1000, derive_seed(1337, 0, 0));
  std::vector<int64_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[static_cast<size_t>(i)], i);
  EXPECT_NE(p, permutation(1000, derive_seed(1337, 1, 0)));
  EXPECT_NE(p, permutation(1000, derive_seed(1337, 0, 1)));
  EXPECT_EQ(p, permutation(1000, derive_seed(1337, 0, 0)));
  // Roughly uniform: each position's mean over many shuffles of 4 is 1.5.
  std::vector<double> mean(4, 0);
  for (uint64_t k = 0; k < 4000; ++k) {
    const auto q = permutation(4, k);
    for (size_t i = 0; i < 4; ++i) mean[i] += static_cast<double>(q[i]) / 4000;
  }
  for (double m : mean) EXPECT_NEAR(m, 1.5, 0.06);
}
