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
// float32); the e4m3 weight copies, their transposes and their scales are made
// once per optimizer step (Fp8WeightCache), as the weights kernel does for bf16
// (kernels/linear.h).
//
// cuBLASLt's FP8 GEMM takes only operands whose reduction dimension is contiguous
// ("TN"), and each of the three GEMMs reduces over another dimension: w8 over
// `in` forward and over `out` for dx, x8 over `in` forward and over the rows for
// dw, g8 over `out` for dx and over the rows for dw. So every FP8 operand is
// needed in both layouts: the quantizer writes the tensor and its transpose in one
// pass (Fp8Tensor::qt), and the weights' transposes are cached with the weights.
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
// With `transposed` (a 2-D t only), qt is q's transpose, contiguous: q.t() with
// the transposed layout, written by the same pass on CUDA. `amax` (a float32
// scalar on t's device) is max |t| when the kernel that made t computed it on the
// way (kernels/amax_handoff.h), saving the reduction's pass over t;
// undefined, it is reduced here. The scale is the float32 quotient
// max(fmt) / max(amax, 1e-12), computed inside the cast kernel on CUDA.
struct Fp8Tensor {
  torch::Tensor q, inv;
  torch::Tensor qt;  // defined when asked for
};
Fp8Tensor quantize_fp8(const torch::Tensor& t, c10::ScalarType fmt, bool transposed = false,
                       const torch::Tensor& amax = {});

// The e4m3 copies of weights and their transposes (the input gradient's GEMM
// reads w8 with `out` contiguous) with their inverse scales, made on first use and
// again when the weight has changed (its version counter moved) or refresh() is
// called: once per optimizer step, however many micro-steps read them.
class Fp8WeightCache {
 public:
  const Fp8Tensor& get(const torch::Tensor& param);
  // Quantizes every cached weight again.
  void refresh();
  int64_t bytes() const;  // the copies, their transposes and their scales

 private:
  struct Entry {
    torch::Tensor param;
    Fp8Tensor copy;
    int64_t version;
  };
  std::unordered_map<const c10::TensorImpl*, Entry> entries_;
};

// x @ weight^T + bias through the FP8 GEMMs above, the output in `out_dtype`;
// w8 is weight's cached e4m3 copy with its transpose (quantize_fp8(weight,
// kFp8Forward, true)). weight's gradient arrives in float32 (its dtype), x's in
// x's dtype, bias's through ordinary autograd. The amax of x, and of the output's
// gradient, come from the kernels that made them when handed over
// (kernels/amax_handoff.h), and are reduced here otherwise.
torch::Tensor fp8_linear(const torch::Tensor& x, const torch::Tensor& weight, const Fp8Tensor& w8,
                         const torch::Tensor& bias, c10::ScalarType out_dtype);

// Whether a product with `in` inputs and `out` outputs is large enough for FP8
// to pay (the fp8 kernel's layer filter; fp8_all takes every block product). Per
// token, FP8 saves 6 in out (1/R_bf16 - 1/R_fp8) seconds of GEMM and costs about
// 6 (in + out) / bandwidth of quantization (amax read, cast read, copy and
// transpose written: 6 bytes per element of the input and of the output's
// gradient) and ten launches: with an H100's measured 700 TFLOP/s in bf16, FP8 at
// 1.6 times that and 2.6 TB/s, the break-even is in out / (in + out) of about 740
// plus the launches' share, so a harmonic mean 2 in out / (in + out) of at least
// kFp8MinHarmonicWidth (torchao filters its tensorwise recipe by the same kind of
// shape rule, from its own H100 measurements). docs/kernels.md lists the choice for
// every shipped model.
constexpr int64_t kFp8MinHarmonicWidth = 2048;
bool fp8_pays(int64_t in, int64_t out);

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
