// Peak tensor memory of a stretch of code, as bytes above what was allocated when
// it started.
//  - CUDA: the caching allocator's peak allocated bytes (the figure
//    torch.cuda.max_memory_allocated reports), its peak reset at the start.
//  - CPU: LibTorch's CPU allocator reports every allocation and free to a
//    thread-local memory-profiling hook (what the autograd profiler's
//    profile_memory uses); PeakMemory installs one and keeps the running sum. This
//    counts tensors exactly, unlike RSS, which the heap and page reuse blur. It
//    sees the calling thread, which is where CPU ops allocate their outputs and
//    where autograd runs a CPU backward.
#pragma once

#include <torch/torch.h>

#include <memory>

namespace xsagpt {

class PeakMemory {
 public:
  explicit PeakMemory(torch::Device device);  // starts measuring
  ~PeakMemory();
  PeakMemory(const PeakMemory&) = delete;
  PeakMemory& operator=(const PeakMemory&) = delete;

  int64_t peak_bytes() const;     // highest so far (synchronises a CUDA device)
  int64_t current_bytes() const;  // allocated now

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace xsagpt
