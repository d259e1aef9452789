// Writes one IValue (nested dicts/lists of tensors and scalars) as a PyTorch zip
// archive that Python's `torch.load(path, weights_only=True)` reads: the same
// layout torch.save uses (archive/data.pkl + archive/data/<n> tensor records).
//
// LibTorch's own torch::pickle_save builds the whole archive in memory and tags
// every dict/list with torch.jit._pickle.restore_type_tag, which weights_only
// loading refuses; here tensors stream to the file one by one and containers go
// untagged. The write is atomic: a temporary file, flushed and fsync'ed, renamed
// over the target, so a crash or full disk never leaves a partial file behind.
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

}  // namespace xsagpt
