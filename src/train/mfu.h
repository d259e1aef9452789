// Model FLOPs utilisation: achieved training FLOPs (6N + attention, see
// model/counts.h) over the dense peak of the GPU actually present. The peak is
// looked up by device name; unknown GPUs and CPUs report no MFU rather than a
// number against a guessed peak.
#pragma once

#include <optional>
#include <string>

namespace xsagpt {

// Dense peak FLOP/s for bf16 (or TF32 when bf16 is false) of a GPU by name.
std::optional<double> gpu_peak_flops(const std::string& device_name, bool bf16);

}  // namespace xsagpt

#include <torch/torch.h>
namespace xsagpt {
// The CUDA device's product name ("NVIDIA H100 80GB HBM3"); "" when built without CUDA.
std::string cuda_device_name(const torch::Device& device);
}  // namespace xsagpt
