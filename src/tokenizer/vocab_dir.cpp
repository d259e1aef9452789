// Finding GPT-2's vocabulary files (see find_gpt2_vocab_dir in gpt2_bpe.h). They
// are not shipped with the code (OpenAI's license, 1.5 MB), so a user points at
// them once, or keeps them in the project's data/gpt2/ where every command finds
// them whether it runs from the project root, a subfolder, or the build folder.
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
    throw ConfigError(fmt::format("{}: {} has no encoder.json and vocab.bpe (GPT-2's vocabulary files)", given_by,
                                  dir.string()));
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
      "or put the files in the project's data/gpt2/ (looked in {}). They are at "
      "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/", looked));
}

}  // namespace xsagpt
