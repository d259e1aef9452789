// Integrity of a zip archive such as torch.save writes (checkpoints): every record's
// bytes against the CRC-32 stored in the archive's central directory. PyTorch's own
// reader skips this check (its miniz is built without CRC checks), so a flipped bit
// in a weight would otherwise load as a slightly different model.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace xsagpt {

// CRC-32 (IEEE 802.3, as zip uses), continuing from `crc` (0 to start).
uint32_t crc32(uint32_t crc, const void* data, size_t n);

// The first record whose bytes do not match its CRC ("record 'x/data/3': CRC-32 ...
// stored, ... computed"), or nullopt when all match. Throws std::runtime_error for a
// file whose zip directory cannot be read (truncated, not a zip archive).
std::optional<std::string> zip_crc_mismatch(const std::filesystem::path& path);

}  // namespace xsagpt
