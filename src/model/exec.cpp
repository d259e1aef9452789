#include "model/exec.h"

#include "kernels/add_norm.h"
#include "kernels/gelu_amax.h"

#include <ATen/autocast_mode.h>

namespace xsagpt {

void Exec::set_runtime(const Runtime& r) {
  TORCH_CHECK(r.loss_chunk >= 0, "runtime: loss_chunk must be >= 0");
  // The weight copies belong to the runtime that made them (whether there are any, their
  // dtype): another runtime starts without, so none of the old ones is used or held.
  if (!(r == rt)) {
    weights = WeightCache{};
    fp8_weights = Fp8WeightCache{};
  }
  rt = r;
  at::globalContext().setAllowTF32CuBLAS(r.tf32);
  at::globalContext().setAllowTF32CuDNN(r.tf32);
}

torch::Tensor Exec::linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias) {
  if (!copies()) return torch::nn::functional::linear(x, w, bias);
  return cached_linear(x.to(c10::kBFloat16), w, weights.get(w, c10::kBFloat16), bias);
}

bool Exec::fp8_takes(const torch::Tensor& w) const {
  return w.defined() && rt.kernels.fp8 && (rt.kernels.fp8_all || fp8_pays(w.size(1), w.size(0)));
}

torch::Tensor Exec::block_linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias) {
  if (!fp8_takes(w)) return linear(x, w, bias);
  return fp8_linear(x, w, fp8_weights.get(w), bias, dtype(x));
}

torch::Tensor Exec::weight(const torch::Tensor& w) {
  if (copies()) return weights.get(w, c10::kBFloat16);
  const auto type = w.device().type();
  return at::autocast::is_autocast_enabled(type) ? w.to(at::autocast::get_autocast_dtype(type)) : w;
}

torch::Tensor Exec::norm(const LayerNorm& ln, const torch::Tensor& x, const torch::Tensor& reader) {
  if (!rt.kernels.norm) return ln->forward(x);
  return add_layer_norm(x, {}, ln->weight, ln->bias, ln->eps, dtype(x), fp8_amax({}, reader), rt.kernels.norm_regs)
      .second;
}

torch::Tensor Exec::gelu(const torch::Tensor& pre, GeluKind kind, const torch::Tensor& maker,
                         const torch::Tensor& reader) {
  if (kind == GeluKind::kTanh) return torch::gelu(pre, "tanh");
  const auto amax = fp8_amax(maker, reader);
  if (!amax.output && !amax.input_grad) return torch::gelu(pre);
  return exact_gelu(pre, amax);
}

}  // namespace xsagpt
