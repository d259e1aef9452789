#include "model/runtime.h"

#include "config/schema.h"

#include <sstream>

namespace xsagpt {

Recompute parse_recompute(const std::string& mode, const std::string& key) {
  if (mode == "none") return Recompute::none;
  if (mode == "mlp") return Recompute::mlp;
  if (mode == "block") return Recompute::block;
  throw ConfigError(key + ": expected \"none\", \"mlp\" or \"block\", got \"" + mode + "\"");
}

const char* name(Recompute r) {
  switch (r) {
    case Recompute::mlp: return "mlp";
    case Recompute::block: return "block";
    case Recompute::none: break;
  }
  return "none";
}

Kernels parse_kernels(const std::string& spec, bool cuda, const std::string& key) {
  Kernels k;
  if (spec == "aten") return k;
  if (spec == "auto") {
    // Validated on an H100 (XsaCuda.* against the float64 formula; 1.6-4% of the
    // step against 18-23% for ops). The others default on once a GPU has checked them.
    if (cuda) k.xsa = XsaImpl::fused;
    return k;
  }
  if (spec == "fused") return Kernels{true, true, true, true, XsaImpl::fused_wide};
  std::stringstream ss(spec);
  std::string name;
  bool any = false;
  while (std::getline(ss, name, ',')) {
    any = true;
    if (name == "weights") k.weights = true;
    else if (name == "norm") k.norm = true;
    else if (name == "rope") k.rope = true;
    else if (name == "xsa") k.xsa = k.xsa == XsaImpl::fused_wide ? k.xsa : XsaImpl::fused;
    else if (name == "xsa_wide") k.xsa = XsaImpl::fused_wide;  // XSA's kernels, vectorised
    else if (name == "loss") k.loss = true;
    else
      throw ConfigError(key + ": unknown kernel \"" + name +
                        "\" (expected \"auto\", \"aten\", \"fused\" or a comma-separated list of weights, norm, "
                        "rope, xsa, xsa_wide, loss), got \"" + spec + "\"");
  }
  if (!any) throw ConfigError(key + ": expected \"auto\", \"aten\", \"fused\" or a list of kernels, got \"\"");
  return k;
}

std::string describe(const Kernels& k) {
  const bool on[] = {k.weights, k.norm, k.rope, k.xsa == XsaImpl::fused, k.xsa == XsaImpl::fused_wide, k.loss};
  std::string out;
  for (size_t i = 0; i < std::size(kKernelNames); ++i)
    if (on[i]) out += (out.empty() ? "" : ",") + std::string(kKernelNames[i]);
  return out.empty() ? "aten" : out;
}

}  // namespace xsagpt
