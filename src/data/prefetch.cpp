#include "data/prefetch.h"

namespace xsagpt {

PrefetchingLoader::PrefetchingLoader(DataLoader& loader, size_t depth)
    : loader_(loader), depth_(std::max<size_t>(1, depth)), worker_([this] { run(); }) {}

PrefetchingLoader::~PrefetchingLoader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void PrefetchingLoader::run() {
  // The loader is used only from this thread while the prefetcher lives.
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || queue_.size() < depth_; });
      if (stop_) return;
    }
    Item item;
    try {
      item.before = loader_.state();
      std::tie(item.x, item.y) = loader_.next();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      error_ = std::current_exception();
      cv_.notify_all();
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(item));
    cv_.notify_all();
  }
}

std::pair<torch::Tensor, torch::Tensor> PrefetchingLoader::next() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !queue_.empty() || error_; });
  if (queue_.empty()) std::rethrow_exception(error_);
  auto item = std::move(queue_.front());
  queue_.pop_front();
  cv_.notify_all();
  return {item.x, item.y};
}

LoaderState PrefetchingLoader::state() {
  std::unique_lock<std::mutex> lock(mu_);
  // The front of the queue is the next batch to hand out; with an empty queue the
  // worker is between batches or blocked, so wait for it to produce one.
  cv_.wait(lock, [&] { return !queue_.empty() || error_; });
  if (queue_.empty()) std::rethrow_exception(error_);
  return queue_.front().before;
}

}  // namespace xsagpt
