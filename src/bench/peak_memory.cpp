#include "bench/peak_memory.h"

#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#ifdef XSAGPT_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/cuda.h>
#endif

#include <atomic>
#include <optional>

namespace xsagpt {

// Named, not anonymous: PeakMemory::Impl holds one, and a class of external linkage with a
// member of an anonymous namespace's type is what GCC's -Wsubobject-linkage warns about.
namespace peak_memory_detail {

// Receives the CPU allocator's reports: +bytes on allocation, -bytes on free.
struct CpuAllocationCounter : c10::MemoryReportingInfoBase {
  std::atomic<int64_t> current{0}, peak{0};
  void reportMemoryUsage(void*, int64_t bytes, size_t, size_t, c10::Device device) override {
    if (device.type() != c10::DeviceType::CPU) return;
    const int64_t now = current.fetch_add(bytes) + bytes;
    int64_t p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {}
  }
  bool memoryProfilingEnabled() const override { return true; }
};

}  // namespace peak_memory_detail
using peak_memory_detail::CpuAllocationCounter;

struct PeakMemory::Impl {
  explicit Impl(torch::Device d) : device(d) {}
  torch::Device device;
  std::shared_ptr<CpuAllocationCounter> counter;
  std::optional<c10::DebugInfoGuard> guard;
  int64_t cuda_baseline = 0;
};

PeakMemory::PeakMemory(torch::Device device) : impl_(std::make_unique<Impl>(device)) {
  if (device.is_cpu()) {
    impl_->counter = std::make_shared<CpuAllocationCounter>();
    impl_->guard.emplace(c10::DebugInfoKind::PROFILER_STATE, impl_->counter);
    return;
  }
#ifdef XSAGPT_CUDA
  namespace alloc = c10::cuda::CUDACachingAllocator;
  torch::cuda::synchronize(device.index());
  alloc::resetPeakStats(device.index());
  const auto agg = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  impl_->cuda_baseline = alloc::getDeviceStats(device.index()).allocated_bytes[agg].current;
#else
  TORCH_CHECK(false, "PeakMemory: this build has no CUDA support");
#endif
}

PeakMemory::~PeakMemory() = default;

int64_t PeakMemory::peak_bytes() const {
  if (impl_->device.is_cpu()) return impl_->counter->peak.load();
#ifdef XSAGPT_CUDA
  namespace alloc = c10::cuda::CUDACachingAllocator;
  torch::cuda::synchronize(impl_->device.index());
  const auto agg = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  return alloc::getDeviceStats(impl_->device.index()).allocated_bytes[agg].peak - impl_->cuda_baseline;
#else
  return 0;
#endif
}

int64_t PeakMemory::current_bytes() const {
  if (impl_->device.is_cpu()) return impl_->counter->current.load();
#ifdef XSAGPT_CUDA
  namespace alloc = c10::cuda::CUDACachingAllocator;
  torch::cuda::synchronize(impl_->device.index());
  const auto agg = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  return alloc::getDeviceStats(impl_->device.index()).allocated_bytes[agg].current - impl_->cuda_baseline;
#else
  return 0;
#endif
}

}  // namespace xsagpt
