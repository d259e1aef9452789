#include "config/runtime.h"

#include "util/error.h"

#include <sstream>

namespace xsagpt {

Recompute parse_recompute(const std::string& mode, const std::string& key) {
  if (mode == "none") return Recompute::kNone;
  if (mode == "mlp") return Recompute::kMlp;
  if (mode == "block") return Recompute::kBlock;
  throw ConfigError(key + ": expected \"none\", \"mlp\" or \"block\", got \"" + mode + "\"");
}

const char* name(Recompute r) {
  switch (r) {
    case Recompute::kMlp: return "mlp";
    case Recompute::kBlock: return "block";
    case Recompute::kNone: break;
  }
  return "none";
}

Kernels parse_kernels(const std::string& spec, bool cuda, const std::string& key) {
  Kernels k;
  if (spec == "aten") return k;
  if (spec == "auto") {
    // Validated on an H100 (XsaCuda.* against the float64 formula; 1.6-4% of the
    // step against 18-23% for ops). The others default on once a GPU has checked them.
    if (cuda) k.xsa = XsaImpl::kFused;
    return k;
  }
  if (spec == "fused") return Kernels{true, true, true, true, XsaImpl::kFusedWide};
  std::stringstream ss(spec);
  std::string name;
  bool any = false;
  while (std::getline(ss, name, ',')) {
    any = true;
    if (name == "weights")
      k.weights = true;
    else if (name == "norm")
      k.norm = true;
    else if (name == "rope")
      k.rope = true;
    else if (name == "xsa")
      k.xsa = k.xsa == XsaImpl::kFusedWide ? k.xsa : XsaImpl::kFused;
    else if (name == "xsa_wide")
      k.xsa = XsaImpl::kFusedWide;  // XSA's kernels, vectorised
    else if (name == "loss")
      k.loss = true;
    else
      throw ConfigError(key + ": unknown kernel \"" + name +
                        "\" (expected \"auto\", \"aten\", \"fused\" or a comma-separated list of weights, norm, "
                        "rope, xsa, xsa_wide, loss), got \"" +
                        spec + "\"");
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
  const bool on[] = {k.weights, k.norm, k.rope, k.xsa == XsaImpl::kFused, k.xsa == XsaImpl::kFusedWide, k.loss};
  std::string out;
  for (size_t i = 0; i < std::size(kKernelNames); ++i)
    if (on[i]) out += (out.empty() ? "" : ",") + std::string(kKernelNames[i]);
  return out.empty() ? "aten" : out;
}

}  // namespace xsagpt
