// Training stream and validation set over token shards (design notes in loader.h).
#include "data/loader.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <numeric>

namespace xsagpt {

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void check_options(const LoaderOptions& o) {
  auto bad = [](const std::string& m) { throw DataError("data loader: " + m); };
  if (o.batch_size <= 0) bad(fmt::format("batch_size must be > 0, got {}", o.batch_size));
  if (o.seq_len <= 0) bad(fmt::format("seq_len must be > 0, got {}", o.seq_len));
  if (o.world_size <= 0) bad(fmt::format("world_size must be > 0, got {}", o.world_size));
  if (o.rank < 0 || o.rank >= o.world_size)
    bad(fmt::format("rank must be in [0, {}) (world_size), got {}", o.world_size, o.rank));
  if (o.vocab_size <= 0) bad(fmt::format("vocab_size must be > 0, got {}", o.vocab_size));
}

// Headers of every file the pattern matches; each must hold one sequence.
std::vector<ShardInfo> inspect_all(const std::string& pattern, int64_t T) {
  std::vector<ShardInfo> shards;
  for (const auto& path : expand_patterns(pattern)) {
    auto info = inspect_shard(path);
    if (info.num_tokens < T + 1)
      throw DataError(fmt::format("{}: {} tokens is too short for one sequence of seq_len {} (needs {} tokens)", path,
                                  info.num_tokens, T, T + 1));
    shards.push_back(std::move(info));
  }
  return shards;
}

torch::Tensor batch_tensor(const LoaderOptions& o) {
  return torch::empty({o.batch_size, o.seq_len},
                      torch::TensorOptions().dtype(torch::kLong).pinned_memory(o.pin_memory));
}

// Copies sequence `src` (T+1 tokens) into one row of inputs and targets; returns
// the largest token id, so the vocabulary check rides on the copy.
uint16_t fill_row(const uint16_t* src, int64_t T, int64_t* in, int64_t* tg) {
  uint16_t mx = src[T];
  for (int64_t t = 0; t < T; ++t) {
    in[t] = src[t];
    mx = std::max(mx, src[t]);
  }
  for (int64_t t = 0; t < T; ++t) tg[t] = src[t + 1];
  return mx;
}

[[noreturn]] void bad_token(const ShardInfo& f, const uint16_t* src, int64_t T, int64_t offset, int64_t vocab) {
  int64_t t = 0;
  while (t <= T && src[t] < vocab) ++t;
  const int64_t at = offset + t;
  throw DataError(fmt::format("{}: token id {} at token offset {} (byte {}) is >= vocab_size {}", f.path, src[t], at,
                              f.header_bytes + 2 * at, vocab));
}

std::string digest(const std::vector<ShardInfo>& shards) {
  uint64_t h = 0xcbf29ce484222325ULL;
  auto eat = [&h](const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
    h = (h ^ 0xff) * 0x100000001b3ULL;  // separator
  };
  for (const auto& s : shards) {
    eat(std::filesystem::path(s.path).filename().string());
    eat(std::to_string(s.num_tokens));
  }
  return fmt::format("{:016x}", h);
}

}  // namespace

uint64_t derive_seed(uint64_t seed, uint64_t epoch, uint64_t stream) {
  uint64_t s = seed;
  s = splitmix64(s) ^ epoch;
  s = splitmix64(s) ^ stream;
  return splitmix64(s);
}

std::vector<int64_t> permutation(int64_t n, uint64_t key) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), int64_t{0});
  uint64_t state = key;
  for (int64_t i = n - 1; i > 0; --i) {
    // Lemire's multiply-shift: j uniform in [0, i] up to a bias of (i+1)/2^64.
    const auto j = static_cast<int64_t>((static_cast<unsigned __int128>(splitmix64(state)) * (i + 1)) >> 64);
    std::swap(p[i], p[j]);
  }
  return p;
}

// ---- LoaderState ------------------------------------------------------------

json LoaderState::to_json() const {
  return {{"epoch", epoch},
          {"shard", shard},
          {"sequence", sequence},
          {"seed", seed},
          {"shuffle", shuffle},
          {"seq_len", seq_len},
          {"num_shards", num_shards},
          {"num_tokens", num_tokens},
          {"shards_digest", shards_digest},
          {"shard_fingerprints", shard_fingerprints}};
}

LoaderState LoaderState::from_json(const json& j) {
  if (!j.is_object()) throw DataError("loader state: expected a JSON object, got " + j.dump());
  LoaderState s;
  auto get = [&j](const char* key, auto& out) {
    const auto it = j.find(key);
    if (it == j.end()) throw DataError(fmt::format("loader state: missing key '{}'", key));
    try {
      it->get_to(out);
    } catch (const json::exception&) {
      throw DataError(fmt::format("loader state: key '{}' has the wrong type: {}", key, it->dump()));
    }
  };
  get("epoch", s.epoch);
  get("shard", s.shard);
  get("sequence", s.sequence);
  get("seed", s.seed);
  get("shuffle", s.shuffle);
  get("seq_len", s.seq_len);
  get("num_shards", s.num_shards);
  get("num_tokens", s.num_tokens);
  get("shards_digest", s.shards_digest);
  if (j.contains("shard_fingerprints")) get("shard_fingerprints", s.shard_fingerprints);
  return s;
}

// ---- DataLoader -------------------------------------------------------------

DataLoader::DataLoader(LoaderOptions opts) : opts_(std::move(opts)) {
  check_options(opts_);
  shards_ = inspect_all(opts_.pattern, opts_.seq_len);
  for (const auto& s : shards_) {
    seqs_.push_back((s.num_tokens - 1) / opts_.seq_len);
    seqs_per_epoch_ += seqs_.back();
    num_tokens_ += s.num_tokens;
  }
  digest_ = digest(shards_);
}

int64_t DataLoader::file_at(int64_t epoch, int64_t shard_pos) {
  if (!opts_.shuffle) return shard_pos;
  if (order_epoch_ != epoch) {
    order_ = permutation(static_cast<int64_t>(shards_.size()), derive_seed(opts_.seed, epoch, 0));
    order_epoch_ = epoch;
  }
  return order_[shard_pos];
}

void DataLoader::advance(Pos& p, int64_t n) {
  while (n > 0) {
    const int64_t left = seqs_[file_at(p.epoch, p.shard)] - p.sequence;
    if (n < left) {
      p.sequence += n;
      return;
    }
    n -= left;
    p.sequence = 0;
    if (++p.shard == static_cast<int64_t>(shards_.size())) {
      p.shard = 0;
      ++p.epoch;
      // An epoch boundary: every shard is read again from here, so each must still
      // be the file the run opened (data/shard.h).
      for (const auto& f : shards_) check_unchanged(f);
    }
  }
}

const uint16_t* DataLoader::sequence_tokens(const Pos& p, int64_t* file, int64_t* token_offset) {
  const int64_t f = file_at(p.epoch, p.shard);
  if (mapped_file_ != f) {
    mapped_ = MappedShard();  // unmap before mapping the next one
    mapped_ = MappedShard(shards_[f]);
    mapped_file_ = f;
    seq_order_epoch_ = -1;
  }
  if (opts_.shuffle && seq_order_epoch_ != p.epoch) {
    seq_order_ = permutation(seqs_[f], derive_seed(opts_.seed, p.epoch, static_cast<uint64_t>(f) + 1));
    seq_order_epoch_ = p.epoch;
  }
  const int64_t s = opts_.shuffle ? seq_order_[p.sequence] : p.sequence;
  *file = f;
  *token_offset = s * opts_.seq_len;
  return mapped_.tokens() + *token_offset;
}

std::pair<torch::Tensor, torch::Tensor> DataLoader::next() {
  const int64_t B = opts_.batch_size, T = opts_.seq_len;
  auto inputs = batch_tensor(opts_), targets = batch_tensor(opts_);
  int64_t* in = inputs.data_ptr<int64_t>();
  int64_t* tg = targets.data_ptr<int64_t>();
  Pos p = pos_;
  advance(p, opts_.rank * B);
  for (int64_t b = 0; b < B; ++b) {
    int64_t file = 0, offset = 0;
    const uint16_t* src = sequence_tokens(p, &file, &offset);
    const uint16_t mx = fill_row(src, T, in + b * T, tg + b * T);
    mapped_.check_intact();  // before anything is concluded from the copy
    if (mx >= opts_.vocab_size) bad_token(shards_[file], src, T, offset, opts_.vocab_size);
    advance(p, 1);
  }
  advance(p, (opts_.world_size - opts_.rank - 1) * B);
  pos_ = p;
  return {inputs, targets};
}

LoaderState DataLoader::state() const {
  LoaderState s;
  s.epoch = pos_.epoch;
  s.shard = pos_.shard;
  s.sequence = pos_.sequence;
  s.seed = opts_.seed;
  s.shuffle = opts_.shuffle;
  s.seq_len = opts_.seq_len;
  s.num_shards = static_cast<int64_t>(shards_.size());
  s.num_tokens = num_tokens_;
  s.shards_digest = digest_;
  for (const auto& f : shards_) s.shard_fingerprints.push_back(f.fingerprint);
  return s;
}

void DataLoader::load_state(const LoaderState& s) {
  auto bad = [](const std::string& m) { throw DataError("loader state does not fit this data loader: " + m); };
  if (s.seq_len != opts_.seq_len)
    bad(fmt::format("saved with seq_len {}, this loader has {}", s.seq_len, opts_.seq_len));
  if (s.num_shards != static_cast<int64_t>(shards_.size()) || s.num_tokens != num_tokens_ || s.shards_digest != digest_)
    bad(
        fmt::format("saved over {} shards holding {} tokens (digest {}), but '{}' matches {} shards holding {} tokens "
                    "(digest {})",
                    s.num_shards, s.num_tokens, s.shards_digest, opts_.pattern, shards_.size(), num_tokens_, digest_));
  if (!s.shard_fingerprints.empty()) {
    if (s.shard_fingerprints.size() != shards_.size()) bad("saved with another number of shard fingerprints");
    for (size_t i = 0; i < shards_.size(); ++i)
      if (s.shard_fingerprints[i] != shards_[i].fingerprint)
        bad(
            fmt::format("data shard {} holds other tokens than when the checkpoint was saved (same size, content "
                        "fingerprint {} then, {} now): rewritten in place? Restore it, or start a new run on the "
                        "new data",
                        shards_[i].path, s.shard_fingerprints[i], shards_[i].fingerprint));
  }
  if (s.seed != opts_.seed) bad(fmt::format("saved with seed {}, this loader has {}", s.seed, opts_.seed));
  if (s.shuffle != opts_.shuffle)
    bad(fmt::format("saved with shuffle={}, this loader has {}", s.shuffle, opts_.shuffle));
  if (s.epoch < 0 || s.shard < 0 || s.shard >= s.num_shards)
    bad(fmt::format("position epoch {} shard {} is out of range", s.epoch, s.shard));
  const int64_t n = seqs_[file_at(s.epoch, s.shard)];
  if (s.sequence < 0 || s.sequence >= n)
    bad(fmt::format("sequence {} is out of range for a shard of {} sequences", s.sequence, n));
  pos_ = {s.epoch, s.shard, s.sequence};
}

// ---- ValidationSet ----------------------------------------------------------

ValidationSet::ValidationSet(const LoaderOptions& opts, int64_t max_tokens) : opts_(opts) {
  check_options(opts_);
  const int64_t T = opts_.seq_len;
  shards_ = inspect_all(opts_.pattern, T);
  const auto& shards = shards_;
  const int64_t wanted = max_tokens > 0 ? max_tokens / T : INT64_MAX;
  if (wanted == 0)
    throw DataError(
        fmt::format("validation set: max_tokens {} is less than one sequence of seq_len {}", max_tokens, T));
  maps_.resize(shards.size());
  int64_t available = 0;
  for (size_t f = 0; f < shards.size() && static_cast<int64_t>(seqs_.size()) < wanted; ++f) {
    const int64_t n = std::min((shards[f].num_tokens - 1) / T, wanted - static_cast<int64_t>(seqs_.size()));
    for (int64_t s = 0; s < n; ++s) seqs_.push_back({static_cast<int32_t>(f), s * T});
    maps_[f] = std::make_shared<const MappedShard>(shards[f]);
    available += n;
  }
  const int64_t per_batch = opts_.batch_size * opts_.world_size;
  num_batches_ = available / per_batch;
  if (num_batches_ == 0)
    throw DataError(
        fmt::format("validation set: '{}' gives {} sequences of seq_len {}{}, fewer than one batch of "
                    "batch_size {} x world_size {}",
                    opts_.pattern, available, T, max_tokens > 0 ? fmt::format(" within max_tokens {}", max_tokens) : "",
                    opts_.batch_size, opts_.world_size));
  seqs_.resize(static_cast<size_t>(num_batches_ * per_batch));
}

std::pair<torch::Tensor, torch::Tensor> ValidationSet::batch(int64_t i) const {
  if (i < 0 || i >= num_batches_)
    throw DataError(fmt::format("validation set: batch {} out of range [0, {})", i, num_batches_));
  const int64_t B = opts_.batch_size, T = opts_.seq_len;
  auto inputs = batch_tensor(opts_), targets = batch_tensor(opts_);
  int64_t* in = inputs.data_ptr<int64_t>();
  int64_t* tg = targets.data_ptr<int64_t>();
  const int64_t first = i * B * opts_.world_size + opts_.rank * B;
  for (int64_t b = 0; b < B; ++b) {
    const Seq& s = seqs_[static_cast<size_t>(first + b)];
    const MappedShard& m = *maps_[static_cast<size_t>(s.file)];
    const uint16_t* src = m.tokens() + s.start;
    const uint16_t mx = fill_row(src, T, in + b * T, tg + b * T);
    m.check_intact();  // a val loss from zeros past a new end of the file would be recorded as the run's
    if (mx >= opts_.vocab_size) bad_token(shards_[static_cast<size_t>(s.file)], src, T, s.start, opts_.vocab_size);
  }
  return {inputs, targets};
}

json ValidationSet::identity() const {
  json out = json::array();
  for (const auto& f : shards_)
    out.push_back({{"file", std::filesystem::path(f.path).filename().string()},
                   {"tokens", f.num_tokens},
                   {"fingerprint", f.fingerprint}});
  return out;
}

void ValidationSet::check_identity(const json& saved) const {
  if (!saved.is_array() || saved.empty()) return;
  const json now = identity();
  auto names = [](const json& list) {
    std::vector<std::string> v;
    for (const auto& e : list) v.push_back(e.value("file", json("?")).dump());
    return fmt::format("{}", fmt::join(v, ", "));
  };
  if (saved.size() != now.size() || names(saved) != names(now))
    throw DataError(fmt::format(
        "validation shards: the checkpoint was saved over [{}] but data.val '{}' now matches [{}]; the val curve "
        "would switch data mid-run. Point data.val at the run's shards, or start a new run on the new ones",
        names(saved), opts_.pattern, names(now)));
  for (size_t i = 0; i < now.size(); ++i)
    if (saved[i] != now[i])
      throw DataError(fmt::format(
          "validation shard {} holds other tokens than when the checkpoint was saved ({} tokens, content fingerprint "
          "{} then; {} tokens, {} now): rewritten in place? Restore it, or start a new run on the new data",
          shards_[i].path, saved[i].value("tokens", json()).dump(), saved[i].value("fingerprint", json()).dump(),
          now[i]["tokens"].dump(), now[i]["fingerprint"].dump()));
}

}  // namespace xsagpt
