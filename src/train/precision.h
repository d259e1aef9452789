// Mixed precision: bf16 autocast with float32 weights and optimizer state (the
// usual recipe on Ampere/Hopper, no loss scaling needed), or plain float32.
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

namespace xsagpt {

// Enables bf16 autocast for `device` while alive; a no-op when disabled.
class AutocastGuard {
 public:
  AutocastGuard(torch::Device device, bool enabled) : type_(device.type()), enabled_(enabled) {
    if (!enabled_) return;
    prev_ = at::autocast::is_autocast_enabled(type_);
    prev_dtype_ = at::autocast::get_autocast_dtype(type_);
    at::autocast::set_autocast_enabled(type_, true);
    at::autocast::set_autocast_dtype(type_, at::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~AutocastGuard() {
    if (!enabled_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(type_, prev_);
    at::autocast::set_autocast_dtype(type_, prev_dtype_);
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType type_;
  bool enabled_, prev_ = false;
  at::ScalarType prev_dtype_ = at::kBFloat16;
};

}  // namespace xsagpt
