// Integrity of a zip archive such as torch.save writes (checkpoints), the one rule
// for a readable checkpoint that every command and scripts/eval/export.py apply:
// every record stored (uncompressed), within the file, named alike in its local
// header and in the central directory, and its bytes matching the CRC-32 the central
// directory stores for it. PyTorch's own reader checks none of this (its miniz is
// built without CRC checks, and it finds records by the central directory alone), so
// a flipped bit in a weight would otherwise load as a slightly different model.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace xsagpt {

// CRC-32 (IEEE 802.3, as zip uses), continuing from `crc` (0 to start).
uint32_t crc32(uint32_t crc, const void* data, size_t n);

// The first record that breaks the rule ("record 'x/data/3': CRC-32 ... stored, ...
// computed", "record 'x/data/3': its local header names it 'x/data/1' ..."), or
// nullopt when none does. Throws std::runtime_error for a file whose zip directory
// cannot be read (truncated, not a zip archive).
std::optional<std::string> zip_damage(const std::filesystem::path& path);

}  // namespace xsagpt
