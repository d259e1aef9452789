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
