#include "util/torch_save.h"

#include "util/atomic_file.h"

#include <caffe2/serialize/inline_container.h>
#include <fmt/format.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/import_read.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <unistd.h>
#include <cstdio>

namespace xsagpt {

namespace fs = std::filesystem;

void torch_save(const c10::IValue& value, const fs::path& path) {
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  const fs::path tmp = path.string() + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw SaveError(errno_message(tmp, "cannot open for writing"));
  // The first failure is kept and later output discarded, but the writer is always
  // told that everything was written: PyTorchStreamWriter throws on a short write
  // and then throws again from its destructor (which finishes the archive), and a
  // second exception during unwinding ends the program before any cleanup runs.
  std::string error;
  auto fail = [&](const char* what) {
    if (error.empty()) error = errno_message(path, what);
  };
  try {
    caffe2::serialize::PyTorchStreamWriter writer([&](const void* buf, size_t n) -> size_t {
      if (error.empty() && std::fwrite(buf, 1, n, f) != n) fail("cannot write");
      return n;
    });
    std::vector<char> pickle;
    torch::jit::Pickler pickler([&](const char* buf, size_t n) { pickle.insert(pickle.end(), buf, buf + n); }, nullptr,
                                nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
    pickler.protocol();
    pickler.pushIValue(value);
    pickler.stop();
    torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(), pickler.tensorData(), writer);
    writer.writeEndOfFile();
  } catch (const std::exception& e) {
    if (error.empty()) error = path.string() + ": " + e.what();
  }
  if (error.empty() && std::fflush(f) != 0) fail("cannot write (flush)");
  if (error.empty() && ::fsync(fileno(f)) != 0) fail("cannot write (fsync)");
  if (std::fclose(f) != 0) fail("cannot write (close)");
  if (error.empty() && ::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot rename the new file into place");
  if (!error.empty()) {
    ::unlink(tmp.c_str());
    throw SaveError(error + "; the partial file was removed and nothing was replaced");
  }
  fsync_dir(path.parent_path());
}

c10::IValue torch_load(const fs::path& path) {
  caffe2::serialize::PyTorchStreamReader reader(path.string());
  return torch::jit::readArchiveAndTensors("data", "", "", std::nullopt, std::nullopt, torch::Device(torch::kCPU),
                                           reader);
}

bool is_torch_archive(const fs::path& path) {
  try {
    caffe2::serialize::PyTorchStreamReader reader(path.string());
    return reader.hasRecord("data.pkl");
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace xsagpt
