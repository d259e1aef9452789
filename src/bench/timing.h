// What every benchmark here times with: device work is asynchronous, so a host
// clock means something only after the device has finished what was launched.
#pragma once

#include <torch/torch.h>

#ifdef XSAGPT_CUDA
#include <torch/cuda.h>
#endif

namespace xsagpt {

// Waits for the device's queued work (a no-op on a CPU, whose ops return done).
inline void sync_device(const torch::Device& d) {
#ifdef XSAGPT_CUDA
  if (d.is_cuda()) torch::cuda::synchronize(d.index());
#else
  (void)d;
#endif
}

}  // namespace xsagpt
