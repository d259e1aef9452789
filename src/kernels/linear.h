// Linear layers that compute in bf16 from float32 master weights, with each weight
// cast to bf16 once per optimizer step instead of once per use. Under autocast a
// weight is cast again in every micro-batch, and its bf16 gradient is cast back to
// float32 in a separate kernel before it is accumulated: one copy each way per
// weight per micro-batch. Here the bf16 copies live in a WeightCache that the
// training step refreshes after every optimizer step (a single multi-tensor copy),
// and the weight-gradient GEMM writes float32 itself (cuBLAS with bf16 inputs and a
// float32 output), so the master weights, their gradients and AdamW stay float32 and
// exact, as checkpoints and resume need.
#pragma once

#include <torch/torch.h>

#include <unordered_map>

namespace xsagpt {

class WeightCache {
 public:
  // `param` in `dtype`: the parameter itself when it has that dtype; else a copy
  // made on first use and made again when the parameter has changed since (its
  // version counter moved, or refresh() was called). The copy needs no grad.
  torch::Tensor get(const torch::Tensor& param, c10::ScalarType dtype);
  // Copies every cached parameter again (after an optimizer step, a load, or a
  // broadcast that may not move version counters), in place, by one multi-tensor
  // copy: nothing is allocated per step.
  void refresh();
  int64_t bytes() const;

 private:
  struct Entry {
    torch::Tensor param, copy;
    int64_t version;
  };
  std::unordered_map<const c10::TensorImpl*, Entry> entries_;
};

// x @ weight^T + bias computed with weight_c, the weight already in x's dtype;
// weight's gradient arrives in weight's dtype, bias's in bias's. With weight_c ==
// weight it is torch::nn::functional::linear.
torch::Tensor cached_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& weight_c,
                            const torch::Tensor& bias = {});

// out = a @ b, or out += a @ b with `accumulate`, for 2-D a, b of one dtype and out
// of that dtype or float32: on CUDA the GEMM writes float32 directly.
void matmul_into(torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& b, bool accumulate);

}  // namespace xsagpt
