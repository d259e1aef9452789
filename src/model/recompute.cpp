#include "model/recompute.h"

#include "kernels/amax_handoff.h"

#include <ATen/autocast_mode.h>
#include <torch/custom_class.h>

namespace xsagpt {

namespace {

struct Saved : torch::CustomClassHolder {
  TensorFn fn;
  at::Generator generator;  // the device's default generator and its state at forward time
  torch::Tensor rng_state;
  bool autocast = false;
  at::ScalarType autocast_dtype = at::kBFloat16;
};

struct RecomputeInBackward : torch::autograd::Function<RecomputeInBackward> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, const TensorFn& fn) {
    auto saved = c10::make_intrusive<Saved>();
    saved->fn = fn;
    const auto type = x.device().type();
    saved->generator = at::globalContext().defaultGenerator(x.device());
    saved->rng_state = saved->generator.get_state();
    saved->autocast = at::autocast::is_autocast_enabled(type);
    saved->autocast_dtype = at::autocast::get_autocast_dtype(type);
    ctx->saved_data["saved"] = c10::IValue::make_capsule(saved);
    ctx->save_for_backward({x});
    torch::NoGradGuard no_grad;
    return fn(x);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    auto saved = c10::static_intrusive_pointer_cast<Saved>(ctx->saved_data["saved"].toCapsule());
    auto x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    const auto type = x.device().type();
    // Replay with the forward's random numbers, then put the generator back.
    auto now = saved->generator.get_state();
    saved->generator.set_state(saved->rng_state);
    const bool prev = at::autocast::is_autocast_enabled(type);
    const auto prev_dtype = at::autocast::get_autocast_dtype(type);
    at::autocast::set_autocast_enabled(type, saved->autocast);
    at::autocast::set_autocast_dtype(type, saved->autocast_dtype);
    torch::Tensor y;
    {
      // The replay hands over and takes its own FP8 amaxes (kernels/amax_handoff.h);
      // the one handed over for grad_out, if any, waits for the replayed product.
      const auto pending = save_amax_slot();
      torch::AutoGradMode grad(true);
      y = saved->fn(x);
      restore_amax_slot(pending);
    }
    at::autocast::set_autocast_enabled(type, prev);
    at::autocast::set_autocast_dtype(type, prev_dtype);
    saved->generator.set_state(now);
    torch::autograd::backward({y}, {grad_out[0]});
    return {x.grad(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor recompute_in_backward(const TensorFn& fn, const torch::Tensor& x) {
  // Without an input that needs grad the function's output would have no grad_fn
  // and its parameters no gradients: run it plainly then.
  if (!torch::GradMode::is_enabled() || !x.requires_grad()) return fn(x);
  return RecomputeInBackward::apply(x, fn);
}

}  // namespace xsagpt
