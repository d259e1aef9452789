// Linear layers as FP8 GEMMs (at::_scaled_mm) with dynamic tensorwise scaling,
// the recipe of torchao's float8 training ("tensorwise") after Micikevicius et al.,
// "FP8 Formats for Deep Learning" (2022): weights and activations in e4m3 (more
// mantissa), gradients in e5m2 (more range). Each tensor is scaled by
// fp8_max / amax(tensor) at its use, so its largest element lands on the format's
// largest value, rounded to FP8, and the GEMM multiplies the FP8 operands with the
// two inverse scales (float32 accumulation), giving
//   y = (x * s_x)_fp8 @ ((w * s_w)_fp8)^T / (s_x s_w).
// Forward, input gradient and weight gradient are three such GEMMs:
//   y  = x8 @ w8^T,   dx = g8 @ w8,   dw = g8^T @ x8   (g8: the output's gradient in e5m2).
// The master weights stay float32 (their gradient comes out of the GEMM in
// float32); the e4m3 weight copies and their scales are made once per optimizer
// step (Fp8WeightCache), as the weights kernel does for bf16 (kernels/linear.h).
//
// The quantizer is one CUDA kernel on a GPU (kernels/fp8_cast_cuda.h) and ATen
// ops elsewhere. The same function runs on a CPU (ATen's _scaled_mm takes
// tensorwise scales there) and on CUDA, where cuBLASLt needs sm_89 or newer, the first operand
// row-major and the second column-major, and the inner and output dimensions
// multiples of 16: the operands are laid out for that on every device, and a
// number of rows that is not a multiple of 16 is padded with zero rows (which
// change no amax and no product). Rowwise scales are left out: the CPU's
// _scaled_mm takes tensorwise scales only, so they could not be tested here.
#pragma once

#include <torch/torch.h>

#include <string>
#include <unordered_map>
#include <vector>

namespace xsagpt {

// The two formats' roles, and their largest finite values (448 and 57344).
constexpr c10::ScalarType kFp8Forward = c10::ScalarType::Float8_e4m3fn;  // weights and activations
constexpr c10::ScalarType kFp8Backward = c10::ScalarType::Float8_e5m2;   // gradients

// t scaled by max(fmt) / amax(t), clamped to the format's range and rounded to
// `fmt`, with the inverse scale (a float32 scalar tensor) that undoes it:
// t ~ q.to(float) * inv. The product is taken in float32 whatever t's dtype.
struct Fp8Tensor {
  torch::Tensor q, inv;
};
Fp8Tensor quantize_fp8(const torch::Tensor& t, c10::ScalarType fmt);

// The e4m3 copies of weights with their inverse scales, made on first use and
// again when the weight has changed (its version counter moved) or refresh() is
// called: once per optimizer step.
class Fp8WeightCache {
 public:
  const Fp8Tensor& get(const torch::Tensor& param);
  // Quantizes every cached weight again. keep_addresses: into the copies' own
  // buffers (one more copy each), for a captured CUDA graph that reads them
  // (train/graph_step.h); otherwise into new ones.
  void refresh(bool keep_addresses = false);
  int64_t bytes() const;  // the copies and their scales

 private:
  struct Entry {
    torch::Tensor param;
    Fp8Tensor copy;
    int64_t version;
  };
  std::unordered_map<const c10::TensorImpl*, Entry> entries_;
};

// x @ weight^T + bias through the FP8 GEMMs above, the output in `out_dtype`;
// w8 is weight's cached e4m3 copy. weight's gradient arrives in float32 (its
// dtype), x's in x's dtype, bias's through ordinary autograd.
torch::Tensor fp8_linear(const torch::Tensor& x, const torch::Tensor& weight, const Fp8Tensor& w8,
                         const torch::Tensor& bias, c10::ScalarType out_dtype);

// Why `device` cannot run the FP8 GEMMs with these inner/output dimensions (the
// message of a ConfigError naming `key`), or "" when it can: CUDA needs compute
// capability 8.9 (Ada, Hopper) or newer and dimensions that are multiples of 16.
// A CPU runs any.
std::string fp8_refusal(const torch::Device& device, const std::vector<int64_t>& dims, const std::string& key);
// The same for a GPU called `gpu` of compute capability major.minor.
std::string fp8_refusal(const std::string& gpu, int major, int minor, const std::vector<int64_t>& dims,
                        const std::string& key);
// The dimensions' part of it alone: what any GPU able to run FP8 GEMMs refuses.
std::string fp8_shape_refusal(const std::vector<int64_t>& dims, const std::string& key);

}  // namespace xsagpt
