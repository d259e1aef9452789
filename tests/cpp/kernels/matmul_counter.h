// Counts the matrix products (aten::mm, aten::addmm, aten::addmm_) ATen runs on this thread
// while a MatmulCounter lives: how a test sees that an op skipped work (the
// gradient products of the LM-head loss under no_grad) without timing it.
#pragma once

#include <ATen/record_function.h>

#include <string>

namespace xsagpt::test {

class MatmulCounter {
 public:
  MatmulCounter() {
    count_ = 0;
    handle_ = at::addThreadLocalCallback(
        at::RecordFunctionCallback(&MatmulCounter::seen).scopes({at::RecordScope::FUNCTION}));
  }
  ~MatmulCounter() { at::removeCallback(handle_); }
  MatmulCounter(const MatmulCounter&) = delete;
  MatmulCounter& operator=(const MatmulCounter&) = delete;
  int count() const { return count_; }

 private:
  static std::unique_ptr<at::ObserverContext> seen(const at::RecordFunction& fn) {
    const std::string name = fn.name();
    if (name == "aten::mm" || name == "aten::addmm" || name == "aten::addmm_") ++count_;
    return nullptr;
  }
  at::CallbackHandle handle_;
  static inline thread_local int count_ = 0;
};

}  // namespace xsagpt::test
