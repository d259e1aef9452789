#include "train/mfu.h"

#include <algorithm>
#include <vector>

namespace xsagpt {

std::optional<double> gpu_peak_flops(const std::string& device_name, bool bf16) {
  struct Peak {
    const char* pattern;
    double bf16, tf32;
  };
  // Vendor datasheets, dense (no sparsity). More specific names first.
  static const std::vector<Peak> table{
      {"GB200", 2.5e15, 1.25e15},    {"B200", 2.25e15, 1.1e15},    {"H200", 989e12, 494e12},
      {"H100 PCIe", 756e12, 378e12}, {"H100 NVL", 835e12, 418e12}, {"H100", 989e12, 494e12},
      {"H800", 989e12, 494e12},      {"GH200", 989e12, 494e12},    {"A100", 312e12, 156e12},
      {"A800", 312e12, 156e12},      {"L40S", 362e12, 183e12},     {"L40", 181e12, 90.5e12},
      {"L4", 121e12, 60e12},         {"A10G", 70e12, 35e12},       {"A10", 125e12, 62.5e12},
      {"RTX 4090", 165e12, 82.6e12}, {"RTX 3090", 71e12, 35.6e12}, {"A6000", 155e12, 77.4e12},
      {"V100", 125e12, 15.7e12},
  };
  for (const auto& p : table)
    if (device_name.find(p.pattern) != std::string::npos) return bf16 ? p.bf16 : p.tf32;
  return std::nullopt;
}

}  // namespace xsagpt
