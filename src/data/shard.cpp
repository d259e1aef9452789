// Shard discovery, format detection and memory mapping (format notes in shard.h).
#include "data/shard.h"

#include "util/zip_check.h"

#include <fmt/format.h>

#include <algorithm>

#include <atomic>
#include <bit>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <glob.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static_assert(std::endian::native == std::endian::little, "shards are little-endian; big-endian hosts unsupported");

namespace xsagpt {

const char* format_name(ShardFormat f) { return f == ShardFormat::kLlmC ? "llm.c" : "raw"; }

std::vector<std::string> expand_patterns(const std::string& patterns) {
  std::vector<std::string> files;
  std::set<std::string> seen;
  size_t start = 0;
  while (start <= patterns.size()) {
    size_t comma = patterns.find(',', start);
    if (comma == std::string::npos) comma = patterns.size();
    std::string pat = patterns.substr(start, comma - start);
    start = comma + 1;
    if (pat.empty()) {
      if (patterns.empty())
        throw DataError("data pattern is empty: expected a glob such as data/kjv/shards/train_*.bin");
      continue;
    }
    glob_t g{};
    const int rc = ::glob(pat.c_str(), 0, nullptr, &g);  // results come sorted
    size_t matched = 0;
    std::string not_a_file;  // the first match that is no regular file, and what it is
    if (rc == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) {
        struct stat st {};
        if (::stat(g.gl_pathv[i], &st) != 0) continue;
        if (!S_ISREG(st.st_mode)) {
          if (not_a_file.empty())
            not_a_file = fmt::format("'{}' is {}", g.gl_pathv[i],
                                     S_ISDIR(st.st_mode)    ? "a directory"
                                     : S_ISFIFO(st.st_mode) ? "a FIFO (named pipe)"
                                     : S_ISSOCK(st.st_mode) ? "a socket"
                                                            : "a device or other special file");
          continue;
        }
        ++matched;
        if (seen.insert(g.gl_pathv[i]).second) files.emplace_back(g.gl_pathv[i]);
      }
    }
    globfree(&g);
    if (rc != 0 && rc != GLOB_NOMATCH)
      throw DataError(fmt::format("data pattern '{}': glob failed (error {})", pat, rc));
    // Any match that is no regular file is refused, not skipped: a run would train on
    // fewer shards than the pattern names without a word.
    if (!not_a_file.empty())
      throw DataError(
          fmt::format("data pattern '{}' matched {}: {}; shards must be regular files "
                      "(they are memory-mapped and read more than once)",
                      pat, matched == 0 ? "no regular file" : "something that is no regular file", not_a_file));
    if (matched == 0) throw DataError(fmt::format("data pattern '{}' matched no files", pat));
  }
  return files;
}

namespace {

// ---- SIGBUS: a mapped shard that shrank ----------------------------------------
// Reading a page of a memory-mapped file past its current end raises SIGBUS, which
// would kill the run without a word when a shard is truncated or rewritten while
// training reads it. Mapped ranges are registered here (fixed slots, written under a
// mutex, read lock-free), and the handler names the shard a faulting address falls
// in, then exits; faults elsewhere go to the previous handler (by default: death).
constexpr int kMapSlots = 256;
struct MapSlot {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  char path[1024] = {};
};
MapSlot g_slots[kMapSlots];
std::mutex g_slots_mutex;
struct sigaction g_previous_sigbus {};

void put(const char* s) {
  for (size_t n = std::strlen(s); n > 0;) {
    const ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w, n -= static_cast<size_t>(w);
  }
}

void on_sigbus(int sig, siginfo_t* info, void* context) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (auto& slot : g_slots) {
    if (info->si_code <= 0) break;  // sent by kill/raise: there is no faulting address
    const uintptr_t begin = slot.begin.load(std::memory_order_acquire);
    if (begin == 0 || addr < begin || addr >= slot.end.load(std::memory_order_relaxed)) continue;
    char offset[24];
    int i = sizeof(offset) - 1;
    offset[i] = 0;
    uintptr_t x = addr - begin;
    do offset[--i] = static_cast<char>('0' + x % 10), x /= 10;
    while (x && i > 0);
    put("\nxsagpt: error: data shard ");
    put(slot.path);
    put(": cannot read byte ");
    put(offset + i);
    put(": the file was truncated or rewritten on disk while this run read it (shards are memory-mapped and must "
        "not change during a run). Checkpoints and metrics written so far are intact: restore the shard, or point "
        "the data pattern at unchanged files, and continue with --resume auto.\n");
    ::_exit(1);
  }
  // Not a shard: a fault happens again under the previous handler (by default: death)
  // once this returns; a sent signal is sent again.
  ::sigaction(SIGBUS, &g_previous_sigbus, nullptr);
  if (info->si_code <= 0) ::raise(SIGBUS);
}

void register_mapping(const void* base, size_t length, const std::string& path) {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, &g_previous_sigbus);
  });
  std::lock_guard<std::mutex> lock(g_slots_mutex);
  for (auto& slot : g_slots) {
    if (slot.begin.load(std::memory_order_relaxed) != 0) continue;
    std::snprintf(slot.path, sizeof(slot.path), "%s", path.c_str());
    slot.end.store(reinterpret_cast<uintptr_t>(base) + length, std::memory_order_relaxed);
    slot.begin.store(reinterpret_cast<uintptr_t>(base), std::memory_order_release);
    return;
  }  // all slots taken: such a fault goes unnamed
}

void unregister_mapping(const void* base) {
  std::lock_guard<std::mutex> lock(g_slots_mutex);
  for (auto& slot : g_slots)
    if (slot.begin.load(std::memory_order_relaxed) == reinterpret_cast<uintptr_t>(base)) slot.begin.store(0);
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string sys_error(const std::string& path, const char* what) {
  return fmt::format("{}: cannot {}: {}", path, what, std::strerror(errno));
}

}  // namespace

ShardInfo inspect_shard(const std::string& path) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) throw DataError(sys_error(path, "open"));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) throw DataError(sys_error(path, "stat"));
  const int64_t size = st.st_size;

  int32_t header[256] = {};
  const ssize_t got = ::pread(f.fd, header, sizeof(header), 0);
  if (got < 0) throw DataError(sys_error(path, "read"));

  ShardInfo info;
  info.path = path;
  info.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  info.fingerprint = shard_fingerprint(path);
  if (got >= 4 && header[0] == kLlmcMagic) {
    if (got < kLlmcHeaderBytes)
      throw DataError(fmt::format("{}: llm.c shard truncated: {} bytes, shorter than its {}-byte header", path, size,
                                  kLlmcHeaderBytes));
    if (header[1] != kLlmcVersion)
      throw DataError(fmt::format("{}: unsupported llm.c shard version {} (expected {}: uint16 GPT-2 tokens)", path,
                                  header[1], kLlmcVersion));
    const int64_t count = header[2];
    const int64_t expected = kLlmcHeaderBytes + 2 * count;
    if (count < 0 || size != expected)
      throw DataError(
          fmt::format("{}: size {} bytes does not match the header's token count {} (expected 1024 + 2*{} = {} bytes): "
                      "truncated or corrupt",
                      path, size, count, count, expected));
    if (header[3] < 0)
      throw DataError(fmt::format("{}: header field 3 is {}, expected 0 (GPT-2 ids) or a compact vocabulary's size",
                                  path, header[3]));
    info.format = ShardFormat::kLlmC;
    info.header_bytes = kLlmcHeaderBytes;
    info.num_tokens = count;
    info.compact_vocab = header[3];
    return info;
  }
  // A header that is right in every respect but the magic is an llm.c file someone
  // (or some other tool's version) stamped differently, not 1024 bytes of tokens.
  if (got == kLlmcHeaderBytes && header[1] == kLlmcVersion && header[2] > 0) {
    const int64_t count = header[2];
    if (size == kLlmcHeaderBytes + 2 * count || size == kLlmcHeaderBytes + 4 * count)
      throw DataError(
          fmt::format("{}: wrong magic {} in an llm.c-style header (expected {})", path, header[0], kLlmcMagic));
  }
  if (size % 2 != 0)
    throw DataError(
        fmt::format("{}: not a token shard: no llm.c header (magic {}) and an odd size ({} bytes) "
                    "for headerless uint16 tokens",
                    path, kLlmcMagic, size));
  info.format = ShardFormat::kRaw;
  info.header_bytes = 0;
  info.num_tokens = size / 2;
  return info;
}

MappedShard::MappedShard(const ShardInfo& info) : path_(info.path) {
  num_tokens_ = info.num_tokens;
  length_ = static_cast<size_t>(info.header_bytes + 2 * info.num_tokens);
  if (length_ == 0) return;
  Fd f{::open(info.path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) throw DataError(sys_error(info.path, "open"));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) throw DataError(sys_error(info.path, "stat"));
  if (static_cast<size_t>(st.st_size) != length_)
    throw DataError(fmt::format("{}: changed on disk: {} bytes now, {} when first inspected", info.path,
                                static_cast<int64_t>(st.st_size), length_));
  base_ = ::mmap(nullptr, length_, PROT_READ, MAP_PRIVATE, f.fd, 0);
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    throw DataError(sys_error(info.path, "mmap"));
  }
  register_mapping(base_, length_, info.path);
  // Start reading the shard in the background: a shuffled walk touches it at random.
  ::madvise(base_, length_, MADV_WILLNEED);
  tokens_ = reinterpret_cast<const uint16_t*>(static_cast<const char*>(base_) + info.header_bytes);
}

MappedShard::MappedShard(MappedShard&& o) noexcept { *this = std::move(o); }

MappedShard& MappedShard::operator=(MappedShard&& o) noexcept {
  if (this != &o) {
    unmap();
    base_ = std::exchange(o.base_, nullptr);
    length_ = std::exchange(o.length_, 0);
    tokens_ = std::exchange(o.tokens_, nullptr);
    num_tokens_ = std::exchange(o.num_tokens_, 0);
    path_ = std::move(o.path_);
  }
  return *this;
}

MappedShard::~MappedShard() { unmap(); }

void MappedShard::unmap() {
  if (base_) {
    unregister_mapping(base_);
    ::munmap(base_, length_);
  }
  base_ = nullptr;
  tokens_ = nullptr;
}

void MappedShard::check_intact() const {
  if (!base_) return;
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) throw DataError(sys_error(path_, "stat"));
  if (static_cast<size_t>(st.st_size) >= length_) return;
  throw DataError(fmt::format(
      "data shard {}: {} bytes now, {} when this run opened it: truncated on disk while the run read it, so what "
      "was read past its new end are zeros, not tokens. The run stops before using them; checkpoints and metrics "
      "written so far are intact: restore the shard (shards must not change during a run), then --resume auto",
      path_, static_cast<int64_t>(st.st_size), length_));
}

void check_token_ids(const ShardInfo& info, int64_t vocab_size) {
  if (vocab_size > 0xffff) return;  // every uint16 id fits
  const MappedShard m(info);
  const uint16_t* t = m.tokens();
  const auto limit = static_cast<uint16_t>(vocab_size);
  constexpr int64_t kBlock = 1 << 16;  // a branch per block, not per token: the max loop vectorises
  for (int64_t start = 0; start < m.num_tokens(); start += kBlock) {
    const int64_t end = std::min(m.num_tokens(), start + kBlock);
    uint16_t mx = 0;
    for (int64_t i = start; i < end; ++i) mx = std::max(mx, t[i]);
    if (mx < limit) continue;
    int64_t at = start;
    while (t[at] < limit) ++at;
    throw DataError(fmt::format("{}: token id {} at token offset {} (byte {}) is >= vocab_size {}", info.path, t[at],
                                at, info.header_bytes + 2 * at, vocab_size));
  }
}

std::string shard_fingerprint(const std::string& path) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) throw DataError(sys_error(path, "open"));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) throw DataError(sys_error(path, "stat"));
  const int64_t size = st.st_size;
  uint32_t crc = crc32(0, &size, sizeof size);
  constexpr int64_t kBlock = 4096, kBlocks = 16;
  std::vector<char> buf(kBlock);
  for (int64_t k = 0; k < kBlocks; ++k) {
    const int64_t at = size <= kBlock ? 0 : (size - kBlock) * k / (kBlocks - 1);
    const ssize_t n = ::pread(f.fd, buf.data(), kBlock, at);
    if (n < 0) throw DataError(sys_error(path, "read"));
    crc = crc32(crc, buf.data(), static_cast<size_t>(n));
    if (size <= kBlock) break;
  }
  return fmt::format("{:08x}", crc);
}

void check_unchanged(const ShardInfo& info) {
  struct stat st {};
  if (::stat(info.path.c_str(), &st) != 0) throw DataError(sys_error(info.path, "stat"));
  const int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  const int64_t size = info.header_bytes + 2 * info.num_tokens;
  std::string what;
  if (st.st_size != size)
    what = fmt::format("{} bytes now, {} when the run opened it", static_cast<int64_t>(st.st_size), size);
  else if (mtime != info.mtime_ns)
    what = "modified (mtime changed) since the run opened it";
  else if (shard_fingerprint(info.path) != info.fingerprint)
    what = "its content changed since the run opened it";
  if (!what.empty())
    throw DataError(
        fmt::format("data shard {}: {}. Shards must not change while a run uses them (write a new "
                    "file and rename it over the old one, as data/prepare.py does, between runs); "
                    "restore it, then --resume auto",
                    info.path, what));
}

}  // namespace xsagpt
