// Writes one IValue (nested dicts/lists of tensors and scalars) as a PyTorch zip
// archive that Python's `torch.load(path, weights_only=True)` reads: the same
// layout torch.save uses (archive/data.pkl + archive/data/<n> tensor records).
//
// LibTorch's own torch::pickle_save builds the whole archive in memory and tags
// every dict/list with torch.jit._pickle.restore_type_tag, which weights_only
// loading refuses; here tensors stream to the file one by one and containers go
// untagged. The write is atomic: a temporary file (`<path>.tmp`), flushed and
// fsync'ed, renamed over the target. A failed write (full disk, I/O error) throws
// SaveError naming the file and the cause after removing the temporary file; a
// process killed mid-save leaves the target as it was, plus the `.tmp`.
#pragma once

#include <ATen/core/ivalue.h>

#include <filesystem>
#include <stdexcept>

namespace xsagpt {

struct SaveError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void torch_save(const c10::IValue& value, const std::filesystem::path& path);

// Reads what torch_save (or Python's torch.save of plain containers) wrote.
// Throws c10::Error on a truncated or foreign file.
c10::IValue torch_load(const std::filesystem::path& path);

// Whether `path` is a readable PyTorch zip archive with a pickle (data.pkl), whatever
// the pickle holds: tells a file torch_load cannot rebuild (Python objects such as a
// state_dict's OrderedDict) from a truncated or foreign one.
bool is_torch_archive(const std::filesystem::path& path);

}  // namespace xsagpt
