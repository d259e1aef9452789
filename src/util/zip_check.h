// Integrity of a zip archive such as torch.save writes (checkpoints), the one rule
// for a readable checkpoint that every command and scripts/eval/export.py apply
// (scripts/eval/zip_check.py is this file in Python, the same checks in the same order
// with the same words, so one file gets one verdict from both):
//  - the end-of-central-directory record's numbers agree with the zip64 end record
//    when the file has one (PyTorch writes both, and its reader and Python's zipfile
//    read the zip64 one, so a changed byte in the other would otherwise go unseen by
//    them and be read differently by a reader that trusts it), and the central
//    directory they locate ends where the end records begin;
//  - every record stored (uncompressed), within the file, named alike in its local
//    header and in the central directory, and its bytes matching the CRC-32 the
//    central directory stores for it.
// PyTorch's own reader checks none of this (its miniz is built without CRC checks,
// and it finds records by the central directory alone), so a flipped bit in a weight
// would otherwise load as a slightly different model.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace xsagpt {

// CRC-32 (IEEE 802.3, as zip uses), continuing from `crc` (0 to start).
uint32_t crc32(uint32_t crc, const void* data, size_t n);

// The first thing that breaks the rule, as bytes changed since the file was written
// ("record 'x/data/3': CRC-32 ... stored, ... computed", "the end-of-central-directory
// record gives the central directory's size as ..., its zip64 end record as ..."), or
// nullopt when nothing does. Throws std::runtime_error for a file whose zip directory
// cannot be read at all ("no end-of-central-directory record (...)": cut short, or not
// a zip archive, which every checkpoint xsagpt writes is).
std::optional<std::string> zip_damage(const std::filesystem::path& path);

}  // namespace xsagpt
