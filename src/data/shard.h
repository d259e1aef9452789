// Token shards on disk: finding them, recognising their format, mapping them.
//
// Two formats hold GPT-2 token ids as little-endian uint16:
//  * llm.c / modded-nanogpt (what the FineWeb GPT-2 shards are published in): a
//    1024-byte header of 256 little-endian int32, [0] magic 20240520, [1] version 1,
//    [2] token count N, [3] 0 (or a compact vocabulary's size K, data/vocab.h), the
//    rest zero; then N uint16 tokens. File size is exactly 1024 + 2*N bytes.
//  * nanoGPT's headerless train.bin / val.bin: the whole file is uint16 tokens.
//
// Detection: a file whose first int32 is the llm.c magic is llm.c and must be a
// valid one (a raw GPT-2 file cannot start with it: its low uint16, 55432, is not
// a GPT-2 token id). A file whose first 1024 bytes read as a consistent llm.c
// header (version 1, size == 1024 + 2*count) except for the magic is reported as
// a wrong magic rather than silently read as raw tokens. Anything else is raw.
//
// Only the header is read when a shard is inspected; the tokens are memory-mapped
// when a loader reaches the shard, so thousands of 100M-token shards cost neither
// memory nor start-up time. A mapped shard must not change on disk: reading a
// truncated one faults (SIGBUS), and the process then exits with a message naming
// the shard instead of dying silently (shard.cpp). A truncation that keeps the last
// page mapped reads as zeros instead: MappedShard::check_intact() finds it.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace xsagpt {

// Anything wrong with the data files; the message names the file.
struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline constexpr int32_t kLlmcMagic = 20240520;
inline constexpr int32_t kLlmcVersion = 1;
inline constexpr int64_t kLlmcHeaderBytes = 256 * sizeof(int32_t);

enum class ShardFormat { kLlmC, kRaw };
const char* format_name(ShardFormat f);

struct ShardInfo {
  std::string path;
  ShardFormat format = ShardFormat::kRaw;
  int64_t header_bytes = 0;  // where the tokens start
  int64_t num_tokens = 0;
  int64_t compact_vocab = 0;  // header[3]: a compact vocabulary's size; 0: GPT-2 ids (and raw files)
  // What the shard was when inspected, to notice a rewrite (same size included):
  int64_t mtime_ns = 0;
  std::string fingerprint;  // shard_fingerprint()
};

// A cheap content digest: CRC-32 over the file size and 16 blocks of 4 KiB spread
// evenly over the file (first and last included). Reading 64 KiB costs nothing at
// start; it catches a shard regenerated or replaced by other data at the same size,
// not an edit that touches none of the sampled blocks (the mtime check while a run
// reads the shard catches those).
std::string shard_fingerprint(const std::string& path);

// Throws DataError when the shard's size, mtime or fingerprint differ from `info`'s:
// the file changed on disk since the run opened it.
void check_unchanged(const ShardInfo& info);

// Files matched by one or more glob patterns separated by ','. Each pattern's
// matches are sorted; patterns keep their order; a file matched twice is listed
// once. A pattern matching no regular file, or matching anything else than regular
// files (a directory, a FIFO), is an error naming the first such match.
std::vector<std::string> expand_patterns(const std::string& patterns);

// Reads and checks the header (or size, for raw files) of one shard.
ShardInfo inspect_shard(const std::string& path);

// Throws DataError naming the first token id >= vocab_size (file, token offset and
// byte), reading the whole shard: the trainer calls it on every shard before it
// writes anything, so bad data never stops a run half way (or after a resume has
// begun to change a finished run).
void check_token_ids(const ShardInfo& info, int64_t vocab_size);

// A read-only memory map of one shard's tokens. Move-only; unmapped on destruction.
class MappedShard {
 public:
  MappedShard() = default;
  explicit MappedShard(const ShardInfo& info);
  MappedShard(MappedShard&& o) noexcept;
  MappedShard& operator=(MappedShard&& o) noexcept;
  MappedShard(const MappedShard&) = delete;
  MappedShard& operator=(const MappedShard&) = delete;
  ~MappedShard();

  const uint16_t* tokens() const { return tokens_; }
  int64_t num_tokens() const { return num_tokens_; }
  const std::string& path() const { return path_; }
  // Throws DataError naming the shard when the file is now shorter than when it was
  // mapped. Call it after copying tokens out: the part of the last page past a new
  // end reads as zeros without a fault, so only the file's size tells that a copy
  // made before this call may hold zeros that were never tokens. (The path is looked
  // at, not the mapped file, so that no descriptor stays open per shard: a shorter
  // file renamed over it mid-run stops the run too, as it should.)
  void check_intact() const;

 private:
  void unmap();
  void* base_ = nullptr;
  size_t length_ = 0;
  const uint16_t* tokens_ = nullptr;
  int64_t num_tokens_ = 0;
  std::string path_;
};

}  // namespace xsagpt
