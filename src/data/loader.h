// Batches of token sequences from shards (see shard.h for the file formats), for
// training (DataLoader: shuffled, rank-split, resumable) and evaluation
// (ValidationSet: a fixed, ordered set of sequences).
//
// Sequences. A shard of N tokens holds floor((N-1)/T) sequences; sequence s is
// tokens [s*T, s*T+T+1): inputs are its first T tokens, targets its last T. The
// tail of a shard that does not fill a sequence is never used. Every shard must
// hold at least one sequence.
//
// Order. The training stream is epoch 0, epoch 1, ...; an epoch visits every
// shard once, and within a shard every sequence once. With shuffle, the shard
// order of epoch e is permutation(S, derive(seed, e, 0)) and the sequence order of
// file f (its index in the sorted file list) during epoch e is
// permutation(n_f, derive(seed, e, f + 1)); without shuffle both are the identity.
// permutation(n, k) is a Fisher-Yates shuffle driven by splitmix64 seeded with k
// (loader.cpp), fully specified here so that an order never depends on a library
// version and can be reproduced outside this program.
//
// Ranks. Global batch k is stream sequences [k*B*W, (k+1)*B*W) for B sequences per
// rank and W ranks; rank r takes [k*B*W + r*B, k*B*W + r*B + B). So ranks are
// disjoint, together they cover the stream, and batches run across shard and epoch
// boundaries without dropping anything.
//
// State. The position (epoch, shard position, sequence position) of the start of
// the next global batch is the whole state: the orders are re-derived from the
// seed. It is the same on every rank, so one rank can checkpoint it. Restoring it
// into a loader over the same shards with the same seed, shuffle and seq_len gives
// exactly the batches the saved loader would have given next; batch size and world
// size may differ (the stream simply continues).
//
// Memory. Shard headers are read when a loader is built (errors surface before
// training starts); tokens are memory-mapped only when the walk reaches a shard and
// only the current shard is mapped. A batch is copied out of the map and widened to
// int64, and its token ids are checked against the vocabulary on that copy (the max
// over the batch), so the loader itself never scans a whole shard. `xsagpt train`
// also scans every train and val shard once at start (check_token_ids in shard.h,
// from TrainingState), so a bad id stops a run before its first step instead of
// hours into it; after that only the per-batch check runs. Not thread-safe: one
// loader per thread.
#pragma once

#include "data/shard.h"

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace xsagpt {

using json = nlohmann::json;

struct LoaderOptions {
  std::string pattern;     // glob, e.g. "data/kjv/shards/train_*.bin"; several separated by ','
  int64_t batch_size = 8;  // sequences per rank per batch (B)
  int64_t seq_len = 1024;  // T
  int64_t rank = 0, world_size = 1;
  uint64_t seed = 1337;
  bool shuffle = true;         // shard order and sequence order within a shard, reshuffled each epoch
  int64_t vocab_size = 50304;  // token ids >= this are an error naming file and offset
  bool pin_memory = false;     // batches in pinned memory (needs CUDA)
};

// Where the training stream stands, plus what that position is relative to.
struct LoaderState {
  int64_t epoch = 0;
  int64_t shard = 0;     // position in this epoch's shard order
  int64_t sequence = 0;  // position in that shard's sequence order
  // Checked by DataLoader::load_state against the loader being restored.
  uint64_t seed = 0;
  bool shuffle = true;
  int64_t seq_len = 0;
  int64_t num_shards = 0;
  int64_t num_tokens = 0;
  std::string shards_digest;  // FNV-1a of the shards' file names and token counts
  // Each shard's content fingerprint (data/shard.h); empty in checkpoints of older
  // versions, which are then not checked for same-size rewrites.
  std::vector<std::string> shard_fingerprints;

  json to_json() const;
  static LoaderState from_json(const json& j);  // DataError on a missing or mistyped key
};

// The randomness of the stream (documented above); exposed for tests and tools.
uint64_t derive_seed(uint64_t seed, uint64_t epoch, uint64_t stream);
std::vector<int64_t> permutation(int64_t n, uint64_t key);

class DataLoader {
 public:
  explicit DataLoader(LoaderOptions opts);
  // inputs, targets: int64 CPU tensors (B, T); targets shifted by one.
  std::pair<torch::Tensor, torch::Tensor> next();
  LoaderState state() const;              // position *before* the next call to next()
  void load_state(const LoaderState& s);  // DataError if it does not fit these shards/options
  int64_t tokens_in_shards() const { return num_tokens_; }
  int64_t sequences_per_epoch() const { return seqs_per_epoch_; }
  const std::vector<ShardInfo>& shards() const { return shards_; }
  const LoaderOptions& options() const { return opts_; }

 private:
  struct Pos {
    int64_t epoch = 0, shard = 0, sequence = 0;
  };
  int64_t file_at(int64_t epoch, int64_t shard_pos);  // which file is at that place in the epoch's order
  void advance(Pos& p, int64_t n);
  const uint16_t* sequence_tokens(const Pos& p, int64_t* file, int64_t* token_offset);

  LoaderOptions opts_;
  std::vector<ShardInfo> shards_;
  std::vector<int64_t> seqs_;  // sequences per file
  int64_t num_tokens_ = 0, seqs_per_epoch_ = 0;
  std::string digest_;
  Pos pos_;
  // Caches, all re-derivable from pos_: the shard order of one epoch, and the
  // mapping and sequence order of the shard being read.
  int64_t order_epoch_ = -1;
  std::vector<int64_t> order_;
  int64_t mapped_file_ = -1, seq_order_epoch_ = -1;
  MappedShard mapped_;
  std::vector<int64_t> seq_order_;
};

// Fixed validation set: the first `max_tokens` worth of sequences of the val shards
// (max_tokens / T sequences; all of them if max_tokens <= 0 or the shards hold
// fewer), in file order, no shuffling. Batch i of rank r is sequences
// [i*B*W + r*B, i*B*W + r*B + B), so ranks are disjoint and each has num_batches()
// batches; the remainder that does not fill a global batch is left out. Keep
// max_tokens a multiple of B*W*T to evaluate the same sequences at any world size.
class ValidationSet {
 public:
  ValidationSet(const LoaderOptions& opts, int64_t max_tokens);  // opts.shuffle ignored
  int64_t num_batches() const { return num_batches_; }
  int64_t num_sequences() const { return num_batches_ * opts_.batch_size * opts_.world_size; }  // all ranks
  // Every read is checked against the size each shard had when opened: a truncated
  // shard stops the run with a DataError naming it instead of giving a wrong loss.
  std::pair<torch::Tensor, torch::Tensor> batch(int64_t i) const;
  const std::vector<ShardInfo>& shards() const { return shards_; }
  // What the val shards are, for a checkpoint: [{"file": name, "tokens": N,
  // "fingerprint": shard_fingerprint}] for every shard the pattern matches.
  json identity() const;
  // DataError naming the first shard that is not what `saved` (an identity()) says,
  // so a resumed run never switches its val curve to other data. An empty `saved`
  // (a checkpoint of an older version) is not checked.
  void check_identity(const json& saved) const;

 private:
  struct Seq {
    int32_t file;
    int64_t start;  // token offset in the file
  };
  LoaderOptions opts_;
  std::vector<ShardInfo> shards_;
  std::vector<std::shared_ptr<const MappedShard>> maps_;  // per file; null where unused
  std::vector<Seq> seqs_;
  int64_t num_batches_ = 0;
};

}  // namespace xsagpt
