// Zip archive verification (see zip_check.h). Finds the end records (torch.save writes
// a zip64 end record into every archive, and zip64 fields for large tensors), reads the
// central directory, then checks each record's local header and streams its bytes
// through a slicing-by-8 CRC. Only stored (uncompressed) records can be checked this
// way; torch.save writes nothing else, other methods are refused.
// scripts/eval/zip_check.py follows this file function by function.
#include "util/zip_check.h"

#include "util/utf8.h"

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace xsagpt {

namespace {

using Tables = std::array<std::array<uint32_t, 256>, 8>;

const Tables& crc_tables() {
  static const Tables t = [] {
    Tables t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (size_t s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
    return t;
  }();
  return t;
}

uint16_t u16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t u32(const unsigned char* p) { return u16(p) | (static_cast<uint32_t>(u16(p + 2)) << 16); }
uint64_t u64(const unsigned char* p) { return u32(p) | (static_cast<uint64_t>(u32(p + 4)) << 32); }

[[noreturn]] void unreadable(const std::string& what) { throw std::runtime_error(what); }

// The archive's bytes, read at offsets: a read past the end is a directory that points
// outside the file.
class ZipBytes {
 public:
  explicit ZipBytes(const std::filesystem::path& path) : in_(path, std::ios::binary) {
    if (!in_) unreadable("cannot open");
    in_.seekg(0, std::ios::end);
    size_ = static_cast<uint64_t>(in_.tellg());
  }
  uint64_t size() const { return size_; }

  std::vector<unsigned char> read_at(uint64_t offset, uint64_t n) {
    if (offset > size_ || n > size_ - offset) unreadable("short read");
    std::vector<unsigned char> buf(n);
    seek(offset);
    if (!in_.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(n))) unreadable("short read");
    return buf;
  }

  uint32_t crc_at(uint64_t offset, uint64_t n) {
    std::vector<char> buf(1 << 20);
    seek(offset);
    uint32_t got = 0;
    for (uint64_t left = n; left > 0;) {
      const size_t k = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
      if (!in_.read(buf.data(), static_cast<std::streamsize>(k))) unreadable("short read");
      got = crc32(got, buf.data(), k);
      left -= k;
    }
    return got;
  }

 private:
  void seek(uint64_t offset) {
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(offset));
  }
  std::ifstream in_;
  uint64_t size_ = 0;
};

// Where the central directory is, by the end records, and where those begin.
struct Directory {
  uint64_t entries = 0, size = 0, offset = 0, end = 0;
};

constexpr const char* kDirFields[3] = {"record count", "size", "offset"};
constexpr uint64_t kSaturated[3] = {0xffff, 0xffffffff, 0xffffffff};  // "see the zip64 end record"

// The zip64 end record the locator in front of the end-of-central-directory record
// points to, checked against that record's numbers (`fields`), which it replaces.
std::optional<std::string> read_zip64_end(ZipBytes& f, uint64_t locator, const uint64_t (&fields)[3], Directory& dir) {
  const uint64_t at = u64(f.read_at(locator + 8, 8).data());
  if (at > locator || locator - at < 56) unreadable("no zip64 end record where its locator points");
  const auto z = f.read_at(at, 56);
  if (u32(z.data()) != 0x06064b50) unreadable("no zip64 end record where its locator points");
  if (u32(&z[16]) != 0 || u32(&z[20]) != 0) return "the zip64 end record names a disk other than the first";
  if (u64(&z[24]) != u64(&z[32]))
    return fmt::format("the zip64 end record counts {} records on its disk and {} in all", u64(&z[24]), u64(&z[32]));
  const uint64_t z64[3] = {u64(&z[32]), u64(&z[40]), u64(&z[48])};
  for (int i = 0; i < 3; ++i)
    if (fields[i] != kSaturated[i] && fields[i] != z64[i])
      return fmt::format(
          "the end-of-central-directory record gives the central directory's {} as {}, its zip64 end record as {}",
          kDirFields[i], fields[i], z64[i]);
  dir = {z64[0], z64[1], z64[2], at};
  return std::nullopt;
}

// The end-of-central-directory record (the last one in the final 64 KiB + 22 bytes),
// its zip64 end record when it has one, and the central directory they locate, which
// must end where they begin: every number of theirs is checked against another.
std::optional<std::string> locate_directory(ZipBytes& f, Directory& dir) {
  if (f.size() < 22) unreadable("shorter than an end-of-central-directory record");
  const uint64_t tail_len = std::min<uint64_t>(f.size(), 65536 + 22), tail_at = f.size() - tail_len;
  const auto tail = f.read_at(tail_at, tail_len);
  int64_t i = static_cast<int64_t>(tail_len) - 22;
  while (i >= 0 && u32(&tail[i]) != 0x06054b50) --i;
  if (i < 0) unreadable("no end-of-central-directory record (not a zip archive, as xsagpt writes, or one cut short)");
  const unsigned char* e = &tail[i];
  const uint64_t eocd = tail_at + static_cast<uint64_t>(i), after = f.size() - eocd - 22;
  if (after != u16(e + 20))
    return fmt::format("{} bytes follow the end-of-central-directory record, whose comment is {} bytes", after,
                       u16(e + 20));
  if (u16(e + 4) != 0 || u16(e + 6) != 0)
    return "the end-of-central-directory record names a disk other than the first";
  if (u16(e + 8) != u16(e + 10))
    return fmt::format("the end-of-central-directory record counts {} records on its disk and {} in all", u16(e + 8),
                       u16(e + 10));
  const uint64_t fields[3] = {u16(e + 10), u32(e + 12), u32(e + 16)};
  dir = {fields[0], fields[1], fields[2], eocd};
  if (i >= 20 && u32(e - 20) == 0x07064b50) {
    if (auto damage = read_zip64_end(f, eocd - 20, fields, dir)) return damage;
  } else if (fields[0] == kSaturated[0] || fields[1] == kSaturated[1] || fields[2] == kSaturated[2]) {
    unreadable("no zip64 end record, which the end-of-central-directory record refers to");
  }
  if (dir.offset > dir.end || dir.end - dir.offset != dir.size)
    return fmt::format("the central directory (byte {}, {} bytes) does not end where the end records begin (byte {})",
                       dir.offset, dir.size, dir.end);
  return std::nullopt;
}

struct Entry {
  std::string name;
  uint16_t method = 0;
  uint32_t crc = 0;
  uint64_t csize = 0, usize = 0, local = 0;
};

// The central directory's entry at `at`, moving `at` past it.
Entry read_entry(const std::vector<unsigned char>& cd, size_t& at) {
  if (at + 46 > cd.size() || u32(&cd[at]) != 0x02014b50) unreadable("corrupt central directory");
  Entry e;
  e.method = u16(&cd[at + 10]);
  e.crc = u32(&cd[at + 16]);
  e.csize = u32(&cd[at + 20]);
  e.usize = u32(&cd[at + 24]);
  e.local = u32(&cd[at + 42]);
  const size_t name_len = u16(&cd[at + 28]), extra_len = u16(&cd[at + 30]), comment_len = u16(&cd[at + 32]);
  if (at + 46 + name_len + extra_len + comment_len > cd.size()) unreadable("corrupt central directory");
  e.name.assign(reinterpret_cast<const char*>(&cd[at + 46]), name_len);
  // zip64: the fields saturated at 0xffffffff follow in the extra field 0x0001, in this order.
  const size_t extra_end = at + 46 + name_len + extra_len;
  for (size_t x = at + 46 + name_len; x + 4 <= extra_end;) {
    const uint16_t id = u16(&cd[x]), len = u16(&cd[x + 2]);
    if (id == 0x0001) {
      size_t f = x + 4;
      for (uint64_t* v : {&e.usize, &e.csize, &e.local})
        if (*v == 0xffffffff && f + 8 <= x + 4 + len) *v = u64(&cd[f]), f += 8;
    }
    x += 4 + len;
  }
  at = extra_end + comment_len;
  return e;
}

// One record against its central directory entry: stored, named alike in its local
// header, within the file, and matching its CRC-32.
std::optional<std::string> check_record(ZipBytes& f, const Entry& e) {
  const std::string shown = utf8::escape_invalid(e.name);  // a damaged name may not be UTF-8
  if (e.method != 0)
    return fmt::format("record '{}': compressed (method {}), which xsagpt never writes", shown, e.method);
  if (e.csize != e.usize)
    return fmt::format("record '{}': stored, yet its sizes differ ({} and {} bytes)", shown, e.csize, e.usize);
  const bool fits = e.local <= f.size() && f.size() - e.local >= 30;
  const auto lh = fits ? f.read_at(e.local, 30) : std::vector<unsigned char>(30, 0);
  if (u32(lh.data()) != 0x04034b50)
    return fmt::format("record '{}': no local header at byte {}, where the central directory places it", shown,
                       e.local);
  // Each record's name is written twice, in its local header and in the central
  // directory, from one string: two that differ are bytes changed since, even where
  // no CRC covers them.
  const uint64_t name_at = e.local + 30, data_at = name_at + u16(&lh[26]) + u16(&lh[28]);
  if (data_at > f.size()) return fmt::format("record '{}': runs past the end of the file (truncated)", shown);
  const auto local_name = f.read_at(name_at, u16(&lh[26]));
  const std::string_view local(reinterpret_cast<const char*>(local_name.data()), local_name.size());
  if (local != e.name)
    return fmt::format("record '{}': its local header names it '{}' (the two copies of a record's name differ)", shown,
                       utf8::escape_invalid(std::string(local)));
  if (e.csize > f.size() - data_at) return fmt::format("record '{}': runs past the end of the file (truncated)", shown);
  const uint32_t got = f.crc_at(data_at, e.csize);
  if (got != e.crc)
    return fmt::format("record '{}': CRC-32 {:08x} stored, {:08x} computed over its {} bytes", shown, e.crc, got,
                       e.csize);
  return std::nullopt;
}

}  // namespace

uint32_t crc32(uint32_t crc, const void* data, size_t n) {
  const auto& t = crc_tables();
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    const uint32_t lo = u32(p) ^ crc, hi = u32(p + 4);
    crc = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^ t[3][hi & 0xff] ^
          t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
  }
  while (n--) crc = t[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return ~crc;
}

std::optional<std::string> zip_damage(const std::filesystem::path& path) {
  ZipBytes f(path);
  Directory dir;
  if (auto damage = locate_directory(f, dir)) return damage;
  const auto cd = f.read_at(dir.offset, dir.size);
  size_t at = 0;
  for (uint64_t i = 0; i < dir.entries; ++i)
    if (auto damage = check_record(f, read_entry(cd, at))) return damage;
  if (at != cd.size())
    return fmt::format("the central directory holds {} bytes after its {} records", cd.size() - at, dir.entries);
  return std::nullopt;
}

}  // namespace xsagpt
