// Zip archive verification (see zip_check.h). Reads the central directory (zip64
// included: torch.save writes zip64 records for large tensors), then checks each
// record's local header and streams its bytes through a slicing-by-8 CRC. Only stored (uncompressed) records can
// be checked this way; torch.save writes nothing else, other methods are refused.
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
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open");
  auto bad = [](const char* what) { throw std::runtime_error(std::string("not a readable zip archive: ") + what); };
  auto read_at = [&](uint64_t offset, size_t n) {
    std::vector<unsigned char> buf(n);
    in.clear();
    in.seekg(static_cast<std::streamoff>(offset));
    if (!in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(n))) bad("short read");
    return buf;
  };
  in.seekg(0, std::ios::end);
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  if (size < 22) bad("shorter than its end record");
  // The end-of-central-directory record: the last one, within the final 64 KiB + 22 bytes.
  const uint64_t tail_len = std::min<uint64_t>(size, 65536 + 22);
  const auto tail = read_at(size - tail_len, tail_len);
  int64_t eocd = -1;
  for (int64_t i = static_cast<int64_t>(tail_len) - 22; i >= 0; --i)
    if (u32(&tail[i]) == 0x06054b50) {
      eocd = i;
      break;
    }
  if (eocd < 0) bad("no end-of-central-directory record");
  uint64_t entries = u16(&tail[eocd + 10]), cd_size = u32(&tail[eocd + 12]), cd_offset = u32(&tail[eocd + 16]);
  if (entries == 0xffff || cd_size == 0xffffffff || cd_offset == 0xffffffff) {
    if (eocd < 20 || u32(&tail[eocd - 20]) != 0x07064b50) bad("no zip64 locator");
    const auto z = read_at(u64(&tail[eocd - 20 + 8]), 56);
    if (u32(z.data()) != 0x06064b50) bad("no zip64 end record");
    entries = u64(&z[32]);
    cd_size = u64(&z[40]);
    cd_offset = u64(&z[48]);
  }
  if (cd_offset + cd_size > size) bad("central directory past the end of the file");
  const auto cd = read_at(cd_offset, cd_size);
  std::vector<char> buf(1 << 20);
  size_t at = 0;
  for (uint64_t e = 0; e < entries; ++e) {
    if (at + 46 > cd.size() || u32(&cd[at]) != 0x02014b50) bad("corrupt central directory");
    const uint16_t method = u16(&cd[at + 10]);
    const uint32_t crc = u32(&cd[at + 16]);
    uint64_t csize = u32(&cd[at + 20]), usize = u32(&cd[at + 24]), local = u32(&cd[at + 42]);
    const size_t name_len = u16(&cd[at + 28]), extra_len = u16(&cd[at + 30]), comment_len = u16(&cd[at + 32]);
    if (at + 46 + name_len + extra_len + comment_len > cd.size()) bad("corrupt central directory");
    const std::string name(reinterpret_cast<const char*>(&cd[at + 46]), name_len);
    const std::string shown = utf8::escape_invalid(name);  // for messages: a damaged name may not be UTF-8
    // zip64: the fields saturated at 0xffffffff follow in the extra field 0x0001, in this order.
    for (size_t x = at + 46 + name_len; x + 4 <= at + 46 + name_len + extra_len;) {
      const uint16_t id = u16(&cd[x]), len = u16(&cd[x + 2]);
      if (id == 0x0001) {
        size_t f = x + 4;
        if (usize == 0xffffffff && f + 8 <= x + 4 + len) usize = u64(&cd[f]), f += 8;
        if (csize == 0xffffffff && f + 8 <= x + 4 + len) csize = u64(&cd[f]), f += 8;
        if (local == 0xffffffff && f + 8 <= x + 4 + len) local = u64(&cd[f]);
      }
      x += 4 + len;
    }
    at += 46 + name_len + extra_len + comment_len;
    if (method != 0)
      return fmt::format("record '{}': compressed (method {}), which xsagpt never writes", shown, method);
    if (csize != usize) bad("a stored record whose sizes differ");
    const auto lh = read_at(local, 30);
    if (u32(lh.data()) != 0x04034b50) bad("corrupt local header");
    // Each record's name is written twice, in its local header and in the central
    // directory, from one string: two that differ are bytes changed since, even where
    // no CRC covers them. Python's zipfile refuses such an archive, and so does this
    // check, so export.py and every command hold a checkpoint to one rule.
    const auto local_name = read_at(local + 30, u16(&lh[26]));
    if (std::string_view(reinterpret_cast<const char*>(local_name.data()), local_name.size()) != name)
      return fmt::format("record '{}': its local header names it '{}' (the two copies of a record's name differ)",
                         shown,
                         utf8::escape_invalid({reinterpret_cast<const char*>(local_name.data()), local_name.size()}));
    uint64_t pos = local + 30 + u16(&lh[26]) + u16(&lh[28]);
    if (pos + csize > size) return fmt::format("record '{}': runs past the end of the file (truncated)", shown);
    in.clear();
    in.seekg(static_cast<std::streamoff>(pos));
    uint32_t got = 0;
    for (uint64_t left = csize; left > 0;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
      if (!in.read(buf.data(), static_cast<std::streamsize>(n))) bad("short read");
      got = crc32(got, buf.data(), n);
      left -= n;
    }
    if (got != crc)
      return fmt::format("record '{}': CRC-32 {:08x} stored, {:08x} computed over its {} bytes", shown, crc, got,
                         csize);
  }
  return std::nullopt;
}

}  // namespace xsagpt
