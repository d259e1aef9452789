// Finding GPT-2's vocabulary files (see find_gpt2_vocab_dir in gpt2_bpe.h). The
// project ships them in data/gpt2/ (with their MIT licences), where every command
// finds them whether it runs from the project root, a subfolder, the build folder
// or anywhere else (the executable's own location leads back to the project), so
// tokenizing works offline; --vocab or XSAGPT_GPT2_VOCAB points elsewhere.
#include "config/schema.h"
#include "tokenizer/gpt2_bpe.h"

#include <fmt/format.h>

#include <cstdlib>
#include <system_error>

namespace xsagpt {

namespace fs = std::filesystem;

namespace {

bool has_vocab(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "encoder.json", ec) && fs::is_regular_file(dir / "vocab.bpe", ec);
}

fs::path checked(const fs::path& dir, const std::string& given_by) {
  if (!has_vocab(dir))
    throw ConfigError(
        fmt::format("{}: {} has no encoder.json and vocab.bpe (GPT-2's vocabulary files)", given_by, dir.string()));
  return dir;
}

}  // namespace

fs::path find_gpt2_vocab_dir(const std::string& explicit_dir) {
  if (!explicit_dir.empty()) return checked(explicit_dir, "GPT-2 vocabulary directory");
  if (const char* env = std::getenv("XSAGPT_GPT2_VOCAB"); env && *env) return checked(env, "XSAGPT_GPT2_VOCAB");

  std::vector<fs::path> roots;
  std::error_code ec;
  for (fs::path d = fs::current_path(ec); !ec && !d.empty(); d = d.parent_path()) {
    roots.push_back(d);
    if (d == d.root_path()) break;
  }
  if (fs::path exe = fs::read_symlink("/proc/self/exe", ec); !ec) {
    roots.push_back(exe.parent_path().parent_path());
    roots.push_back(exe.parent_path().parent_path().parent_path());
  }
  std::string looked;
  for (const auto& root : roots) {
    const fs::path dir = root / "data" / "gpt2";
    if (has_vocab(dir)) return dir;
    looked += (looked.empty() ? "" : ", ") + dir.string();
  }
  throw ConfigError(fmt::format(
      "GPT-2 vocabulary (encoder.json, vocab.bpe) not found: give its directory (--vocab), set XSAGPT_GPT2_VOCAB, "
      "or restore the project's data/gpt2/, which ships them (looked in {})",
      looked));
}

}  // namespace xsagpt
