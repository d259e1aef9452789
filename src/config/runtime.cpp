#include "config/runtime.h"

#include "util/error.h"

#include <algorithm>
#include <iterator>
#include <sstream>

namespace xsagpt {

Recompute parse_recompute(const std::string& mode, const std::string& key) {
  return schema::enum_from_name<Recompute>(mode, key);
}

namespace {

// The kernels, a row each: the name train.kernels takes, how the name switches it
// on, whether a Kernels has it on, what it fuses, the CUDA tests that speak for it
// (a gtest filter, which the GPU verdict reads from `xsagpt config --json`), whether
// "auto" takes it on CUDA, and whether "fused" takes it (not a kernel that changes the
// arithmetic beyond the order of rounding, as fp8 does: "fused" against "aten"
// compares speed, not numerics). A kernel becomes a default only by the GPU verdict
// (scripts/bench/lease.py: its CUDA tests, a 200-step run within 0.01 of ATen's loss,
// faster in every paired round); the H200 verdict of 2026-11-26 found the "fused" set
// together default-worthy (docs/benchmarks.md). On a CPU "auto" takes the ATen twins
// that beat the ops they replace there (scripts/bench/bench_cpu_step.py, the CPU
// ladder's steps against plain PyTorch: docs/benchmarks.md). Parsing, describe(), the list of
// names and the key's help text all read this table, so a new kernel is one row here
// plus its implementation and its tests, and making one a default is one word.
struct KernelRow {
  const char* name;
  void (*enable)(Kernels&);
  bool (*on)(const Kernels&);
  const char* help;
  const char* tests;
  bool auto_on_cuda = false;
  bool in_fused = true;
  bool auto_on_cpu = false;
};

// The tests that train and resume the whole model with "fused" speak for every
// kernel in it.
constexpr const char* kFusedSetTests = "KernelsCuda.WholeModel*:KernelsCuda.TrainingSteps*:KernelsCuda.Resume*";

constexpr KernelRow kKernelTable[] = {
    {"weights", [](Kernels& k) { k.weights = true; }, [](const Kernels& k) { return k.weights; },
     "bf16 weight copies made once per optimizer step, no autocast", "KernelsCuda.CachedLinear*", true},
    // norm_regs is norm with another forward: it names both, and describes as itself.
    {"norm", [](Kernels& k) { k.norm = true; }, [](const Kernels& k) { return k.norm && !k.norm_regs; },
     "residual add + LayerNorm", "KernelsCuda.AddNorm*", true},
    // A second forward of the same op, a row of its own so that the verdict times
    // norm alone and norm_regs alone against aten in one run.
    {"norm_regs", [](Kernels& k) { k.norm = k.norm_regs = true; }, [](const Kernels& k) { return k.norm_regs; },
     "norm, its forward holding each row in registers from one read (rows of 768 to 2560) instead of reading it "
     "three times",
     "KernelsCuda.AddNorm*"},
    {"rope", [](Kernels& k) { k.rope = true; }, [](const Kernels& k) { return k.rope; }, "qkv split + RoPE",
     "KernelsCuda.RopeQkv*", true},
    // xsa_wide wins over xsa in either order: both name XSA's kernels, one of them vectorised.
    {"xsa", [](Kernels& k) { k.xsa = k.xsa == XsaImpl::kFusedWide ? k.xsa : XsaImpl::kFused; },
     [](const Kernels& k) { return k.xsa == XsaImpl::kFused; }, "XSA step", "XsaCuda.*", true},
    {"xsa_wide", [](Kernels& k) { k.xsa = XsaImpl::kFusedWide; },
     [](const Kernels& k) { return k.xsa == XsaImpl::kFusedWide; }, "the XSA kernels with 16-byte vector accesses",
     "XsaCuda.*", true},
    {"loss", [](Kernels& k) { k.loss = true; }, [](const Kernels& k) { return k.loss; },
     "LM-head cross-entropy with its gradient in forward", "KernelsCuda.CrossEntropy*:KernelsCuda.LMHeadLoss*", true,
     /*in_fused=*/true, /*auto_on_cpu=*/true},
    {"fp8", [](Kernels& k) { k.fp8 = true; }, [](const Kernels& k) { return k.fp8 && !k.fp8_all; },
     "the blocks' linear layers large enough to gain (harmonic mean of their widths >= 2048) as FP8 GEMMs: e4m3 "
     "weights and activations, e5m2 gradients, tensorwise scales; sm_89+ on CUDA; not in \"fused\"",
     "Fp8LinearCuda.*", false, /*in_fused=*/false},
    {"fp8_all", [](Kernels& k) { k.fp8 = k.fp8_all = true; }, [](const Kernels& k) { return k.fp8_all; },
     "fp8 for every block linear layer, whatever its size; not in \"fused\"", "Fp8LinearCuda.*", false,
     /*in_fused=*/false},
    {"clip", [](Kernels& k) { k.clip = true; }, [](const Kernels& k) { return k.clip; },
     "the global-norm clip's factor applied inside the fused AdamW's pass (its grad_scale) instead of a pass of "
     "its own over the gradients",
     "ClipFoldCuda.*"},
    // Not in "fused": it needs a model of another function (model.gelu "tanh",
    // which the kernel-table check refuses elsewhere: config/kernel_fit.h).
    {"gelu", [](Kernels& k) { k.gelu = true; }, [](const Kernels& k) { return k.gelu; },
     "the MLP's up projection, tanh GELU and down projection as cuBLASLt GEMMs with the GELU in their epilogues "
     "(GELU_AUX forward, DGELU backward); needs model.gelu=\"tanh\"; not with fp8; not in \"fused\"",
     "GeluMlpCuda.*", false, /*in_fused=*/false},
};

// The named sets a list may hold besides kernel names: "fused,fp8".
void enable_set(Kernels& k, const std::string& set, bool cuda) {
  for (const auto& row : kKernelTable)
    if (set == "fused" ? row.in_fused : cuda ? row.auto_on_cuda : row.auto_on_cpu) row.enable(k);
}

}  // namespace

std::vector<std::string> kernel_names() {
  std::vector<std::string> out;
  for (const auto& row : kKernelTable) out.push_back(row.name);
  return out;
}

std::vector<KernelInfo> kernel_table() {
  const auto patterns = [](const std::string& filter) {
    std::vector<std::string> out;
    std::stringstream ss(filter);
    for (std::string p; std::getline(ss, p, ':');) out.push_back(p);
    return out;
  };
  std::vector<KernelInfo> out;
  for (const auto& row : kKernelTable) {
    auto tests = patterns(row.tests);
    if (row.in_fused)
      for (auto& p : patterns(kFusedSetTests)) tests.push_back(std::move(p));
    out.push_back({row.name, row.help, row.auto_on_cuda, row.in_fused, std::move(tests)});
  }
  return out;
}

const char* kernels_help() {
  static const std::string text = [] {
    std::string list;
    for (const auto& row : kKernelTable) list += (list.empty() ? "" : ", ") + std::string(row.name) + " (" + row.help + ")";
    std::vector<std::string> left;  // the rows "fused" leaves out, as "a, b and c"
    for (const auto& row : kKernelTable)
      if (!row.in_fused) left.push_back(row.name);
    std::string outside;
    for (size_t i = 0; i < left.size(); ++i)
      outside += (i == 0 ? "" : i + 1 == left.size() ? " and " : ", ") + left[i];
    return "fused implementations in place of ATen ops (src/kernels/): \"auto\" (those validated on a GPU: " +
           describe(parse_kernels("auto", /*cuda=*/true)) + " on CUDA; on a CPU the ATen twins measured faster there: " +
           describe(parse_kernels("auto", /*cuda=*/false)) + "), \"aten\" (none), \"fused\" (all but " +
           outside + ") or a comma-separated list of " + list +
           ", \"fused\" or \"auto\" (e.g. fused,fp8). CUDA kernels on CUDA, the same arithmetic in ATen elsewhere";
  }();
  return text.c_str();
}

Kernels parse_kernels(const std::string& spec, bool cuda, const std::string& key) {
  Kernels k;
  if (spec == "aten") return k;
  std::stringstream ss(spec);
  std::string name;
  bool any = false;
  while (std::getline(ss, name, ',')) {
    any = true;
    if (name == "fused" || name == "auto") {
      enable_set(k, name, cuda);
      continue;
    }
    const auto* row = std::find_if(std::begin(kKernelTable), std::end(kKernelTable),
                                   [&](const KernelRow& r) { return name == r.name; });
    if (row == std::end(kKernelTable)) {
      std::string names;
      for (const auto& r : kKernelTable) names += (names.empty() ? "" : ", ") + std::string(r.name);
      throw ConfigError(key + ": unknown kernel \"" + name +
                        "\" (expected \"auto\", \"aten\", \"fused\" or a comma-separated list of " + names +
                        ", \"fused\" or \"auto\"), got \"" + spec + "\"");
    }
    row->enable(k);
  }
  if (!any) throw ConfigError(key + ": expected \"auto\", \"aten\", \"fused\" or a list of kernels, got \"\"");
  return k;
}

bool parse_precision(const std::string& spec, bool cuda, const std::string& key) {
  if (spec == "auto") return cuda;
  if (spec == "bf16") return true;
  if (spec == "fp32") return false;
  throw ConfigError(key + ": expected \"auto\", \"bf16\" or \"fp32\", got \"" + spec + "\"");
}

std::string describe(const Kernels& k) {
  std::string out;
  for (const auto& row : kKernelTable)
    if (row.on(k)) out += (out.empty() ? "" : ",") + std::string(row.name);
  return out.empty() ? "aten" : out;
}

}  // namespace xsagpt
