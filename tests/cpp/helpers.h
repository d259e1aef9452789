// Shared helpers for the C++ tests.
#pragma once

#include "config/model_config.h"
#include "config/runtime.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <cstdlib>
#include <torch/torch.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace xsagpt::test {

// The message of the E that f() throws, or "(no error)": tests assert on what an
// error says (the key, the file, what was expected), not only that one came.
template <class E = std::exception, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "(no error)";
}

// A file's bytes.
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// std::filesystem::remove_all crashes in these binaries: the torch wheel's
// libtorch.so exports its own, broken copy, which the dynamic linker picks. So
// scratch folders are removed one entry at a time (symlinks are not followed).
inline void remove_tree(const std::filesystem::path& p) {
  namespace fs = std::filesystem;
  if (fs::is_directory(fs::symlink_status(p))) {
    std::vector<fs::path> children;
    for (const auto& e : fs::directory_iterator(p)) children.push_back(e.path());
    for (const auto& c : children) remove_tree(c);
  }
  fs::remove(p);
}

// A fixture with a fresh folder of its own under the system's temp dir (`tmp`),
// removed with everything in it after each test.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "xsagpt-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    tmp = tmpl;
  }
  void TearDown() override { remove_tree(tmp); }
  std::filesystem::path tmp;
};

// A model small enough for many forward/backward passes on a CPU core.
inline ModelConfig small_model(const std::string& attention, int64_t vocab = 64) {
  ModelConfig c;
  c.vocab_size = vocab;
  c.block_size = 32;
  c.n_layer = 2;
  c.d_model = 48;
  c.n_head = 3;
  c.head_dim = 20;  // inner width 60 != d_model on purpose
  c.attention = attention;
  return c;
}

// A layer's own parameter `name` (an attention kind's, e.g. "xsa_gate"); undefined where it has none.
inline torch::Tensor own_param(const torch::nn::Module& m, const std::string& name) {
  const auto params = m.named_parameters(/*recurse=*/false);
  const auto* p = params.find(name);
  return p ? *p : torch::Tensor();
}

// d f / d t[i] by central differences in float64, t a leaf that f reads (restored after):
// the independent side of the attention kinds' gradient tests.
inline double central_difference(const std::function<double()>& f, torch::Tensor t, int64_t i, double h = 1e-6) {
  torch::NoGradGuard no_grad;
  auto flat = t.view(-1);
  const double x = flat[i].item<double>();
  flat[i].fill_(x + h);
  const double up = f();
  flat[i].fill_(x - h);
  const double down = f();
  flat[i].fill_(x);
  return (up - down) / (2 * h);
}

// How a test runs a model: checkpointing mode, loss chunk, train.kernels spec (cuda: as on a GPU).
inline Runtime runtime(const std::string& recompute = "none", int64_t loss_chunk = 0,
                       const std::string& kernels = "aten", bool cuda = false, bool bf16 = false) {
  Runtime rt;
  rt.recompute = parse_recompute(recompute);
  rt.loss_chunk = loss_chunk;
  rt.kernels = parse_kernels(kernels, cuda);
  rt.bf16 = bf16;
  return rt;
}

// A file of the source tree. XSAGPT_SOURCE_DIR in the environment wins over the folder
// the binary was built in: the GPU lease runs binaries built on another machine.
inline std::string source_path(const std::string& rel) {
  const char* dir = std::getenv("XSAGPT_SOURCE_DIR");
  return std::string(dir && *dir ? dir : XSAGPT_SOURCE_DIR) + "/" + rel;
}

}  // namespace xsagpt::test
