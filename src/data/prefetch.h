// Background prefetching for the training loader: a thread assembles the next
// batches (mmap reads, widening to int64, pinned memory on CUDA runs) while the
// GPU works, so the step never waits for the host. The queue is short (default 2
// batches); state() is the loader position of the next batch *handed out*, so a
// checkpoint taken between steps resumes exactly, however far the thread ran ahead.
#pragma once

#include "data/loader.h"

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

namespace xsagpt {

class PrefetchingLoader {
 public:
  PrefetchingLoader(DataLoader& loader, size_t depth = 2);
  ~PrefetchingLoader();
  PrefetchingLoader(const PrefetchingLoader&) = delete;
  PrefetchingLoader& operator=(const PrefetchingLoader&) = delete;

  std::pair<torch::Tensor, torch::Tensor> next();  // rethrows the worker's error (e.g. a bad token id)
  LoaderState state();

 private:
  struct Item {
    LoaderState before;
    torch::Tensor x, y;
  };
  void run();

  DataLoader& loader_;
  size_t depth_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace xsagpt
