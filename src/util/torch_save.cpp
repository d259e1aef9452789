#include "util/torch_save.h"

#include <caffe2/serialize/inline_container.h>
#include <fmt/format.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/import_read.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <cstdio>
#include <fcntl.h>
#include <unistd.h>

namespace xsagpt {

namespace fs = std::filesystem;

static void fsync_dir(const fs::path& dir) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

void torch_save(const c10::IValue& value, const fs::path& path) {
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  const fs::path tmp = path.string() + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw SaveError(fmt::format("{}: cannot open for writing", tmp.string()));
  bool ok = true;
  std::string why = "write failed (disk full?)";
  try {
    caffe2::serialize::PyTorchStreamWriter writer([&](const void* buf, size_t n) -> size_t {
      const size_t wrote = std::fwrite(buf, 1, n, f);
      ok = ok && wrote == n;
      return wrote;
    });
    std::vector<char> pickle;
    torch::jit::Pickler pickler([&](const char* buf, size_t n) { pickle.insert(pickle.end(), buf, buf + n); },
                                nullptr, nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
    pickler.protocol();
    pickler.pushIValue(value);
    pickler.stop();
    torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(), pickler.tensorData(), writer);
    writer.writeEndOfFile();
  } catch (const std::exception& e) {
    ok = false;
    why = e.what();
  }
  ok = ok && std::fflush(f) == 0 && ::fsync(fileno(f)) == 0 && !std::ferror(f);
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw SaveError(fmt::format("{}: {}; nothing was replaced", path.string(), why));
  }
  fs::rename(tmp, path);
  fsync_dir(path.parent_path());
}

c10::IValue torch_load(const fs::path& path) {
  caffe2::serialize::PyTorchStreamReader reader(path.string());
  return torch::jit::readArchiveAndTensors("data", "", "", std::nullopt, std::nullopt, torch::Device(torch::kCPU),
                                           reader);
}

}  // namespace xsagpt
