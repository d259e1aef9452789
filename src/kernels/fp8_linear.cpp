// The FP8 linear layer, its quantizer and its weight cache (see fp8_linear.h).
#include "kernels/fp8_linear.h"

#include "kernels/amax_handoff.h"
#include "kernels/common.h"
#include "kernels/fp8_cast_cuda.h"

#include <fmt/format.h>

#include <cmath>

#ifdef XSAGPT_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace xsagpt {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// cuBLASLt's FP8 GEMM wants every dimension of its operands but the output's rows
// a multiple of 16; the rows of x and of the gradient are the reduction dimension
// of the weight-gradient GEMM, so they are padded too (zero rows change neither an
// amax nor a product).
constexpr int64_t kFp8Align = 16;

torch::Tensor pad_rows_fp8(const torch::Tensor& t2) {
  const int64_t extra = (kFp8Align - t2.size(0) % kFp8Align) % kFp8Align;
  return extra == 0 ? t2 : at::constant_pad_nd(t2, {0, 0, 0, extra});
}

double fp8_max(c10::ScalarType fmt) {
  return fmt == kFp8Forward ? 448.0 : 57344.0;  // std::numeric_limits of e4m3fn, e5m2
}

// Each GEMM's operands are (a, b) with a row-major and b column-major, both with
// the reduction dimension contiguous (fp8_linear.h): a transposed copy enters as
// its .t() view, which has that layout.
struct Fp8Linear : torch::autograd::Function<Fp8Linear> {
  // weight is an input only so that its gradient has a place to go; the GEMMs
  // read its e4m3 copy w8, its transpose w8t (scale w_inv).
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& w8, const torch::Tensor& w8t, const torch::Tensor& w_inv,
                               const std::optional<torch::Tensor>& x_amax, int64_t out_dtype) {
    const int64_t rows = x.numel() / x.size(-1);
    const auto xq = quantize_fp8(pad_rows_fp8(x.reshape({rows, x.size(-1)})), kFp8Forward, /*transposed=*/true,
                                 x_amax.value_or(torch::Tensor()));
    // cuBLASLt's fast (fewer-bit) accumulation in the forward GEMM only, torchao's
    // default: the gradients' errors add up over the steps, and the weight
    // gradient's GEMM sums over every token of the micro-batch.
    auto y = at::_scaled_mm(xq.q, w8.t(), xq.inv, w_inv, {}, {}, static_cast<c10::ScalarType>(out_dtype),
                            /*use_fast_accum=*/x.is_cuda());
    // The backward reads x8 only through dw's GEMM, which reduces over the rows:
    // only its transpose is kept.
    ctx->save_for_backward({xq.qt, xq.inv, w8t, w_inv});
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["w_dtype"] = static_cast<int64_t>(weight.scalar_type());
    auto shape = x.sizes().vec();
    shape.back() = w8.size(0);
    return y.narrow(0, 0, rows).view(shape);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const auto &x8t = saved[0], &x_inv = saved[1], &w8t = saved[2], &w_inv = saved[3];
    const auto& gy = grad[0];
    const int64_t rows = gy.numel() / gy.size(-1);
    // The gradient's amax, when the kernel that made gy took it (the norm's backward
    // for a residual branch, the GELU's, RoPE's).
    const auto gq =
        quantize_fp8(pad_rows_fp8(gy.reshape({rows, gy.size(-1)})), kFp8Backward, /*transposed=*/true, take_amax(gy));
    const auto x_dtype = static_cast<c10::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    const auto w_dtype = static_cast<c10::ScalarType>(ctx->saved_data["w_dtype"].toInt());
    auto dx = at::_scaled_mm(gq.q, w8t.t(), gq.inv, w_inv, {}, {}, x_dtype);
    auto dw = at::_scaled_mm(gq.qt, x8t.t(), gq.inv, x_inv, {}, {}, w_dtype);
    auto shape = gy.sizes().vec();
    shape.back() = w8t.size(0);
    return {dx.narrow(0, 0, rows).view(shape), dw, {}, {}, {}, {}, {}};  // nothing for w8, w8t, w_inv, amax
  }
};

}  // namespace

Fp8Tensor quantize_fp8(const torch::Tensor& t, c10::ScalarType fmt, bool transposed, const torch::Tensor& amax) {
  TORCH_CHECK(fmt == kFp8Forward || fmt == kFp8Backward, "quantize_fp8: ", fmt, " is not e4m3fn or e5m2");
  TORCH_CHECK(!transposed || t.dim() == 2, "quantize_fp8: a transposed copy needs a 2-D tensor, not ", t.dim(), "-D");
  auto guard = no_autocast();
  TORCH_CHECK(!amax.defined() || (amax.numel() == 1 && amax.scalar_type() == at::kFloat && amax.device() == t.device()),
              "quantize_fp8: amax must be one float32 on ", t.device());
  const double top = fp8_max(fmt);
  // amax in float32 (exact: the largest |element|). Nothing leaves the device: no sync.
  const auto a = amax.defined() ? amax.reshape({}) : max_abs(t);
  const bool kernel_dtype =
      t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf;
  if (use_cuda_kernel(t) && t.is_contiguous() && kernel_dtype && t.numel() > 0) {
    auto q = at::empty(t.sizes(), t.options().dtype(fmt));
    auto inv = at::empty({}, t.options().dtype(at::kFloat));
    if (!transposed) {
      fp8_scale_cast_cuda(t, a.contiguous(), top, q, inv);
      return {q, inv};
    }
    auto qt = at::empty({t.size(1), t.size(0)}, t.options().dtype(fmt));
    fp8_scale_cast_transpose_cuda(t, a.contiguous(), top, q, qt, inv);
    return {q, inv, qt};
  }
  // The kernels' arithmetic: the floor keeps an all-zero tensor's scale finite.
  const auto scale = top / a.clamp_min(kFp8AmaxFloor);
  // The conversion to FP8 does not saturate (e4m3fn has no infinity: 1000 becomes
  // NaN), and x * scale may round just past the largest value: clamp first.
  auto q = (t.to(at::kFloat) * scale).clamp_(-top, top).to(fmt);
  return {q, scale.reciprocal(), transposed ? q.t().contiguous() : torch::Tensor()};
}

const Fp8Tensor& Fp8WeightCache::get(const torch::Tensor& param) {
  auto it = entries_.find(param.unsafeGetTensorImpl());
  if (it != entries_.end() && it->second.version == param._version() && it->second.copy.q.device() == param.device())
    return it->second.copy;
  if (it == entries_.end()) {  // the trainer refuses these first; this catches every other caller (eval, sample)
    const auto why = fp8_refusal(param.device(), {param.size(0), param.size(1)}, "train.kernels");
    TORCH_CHECK(why.empty(), why);
  }
  torch::NoGradGuard no_grad;
  Entry e{param, quantize_fp8(param.detach(), kFp8Forward, /*transposed=*/true), param._version()};
  if (it == entries_.end()) return entries_.emplace(param.unsafeGetTensorImpl(), e).first->second.copy;
  it->second = e;
  return it->second.copy;
}

void Fp8WeightCache::refresh() {
  torch::NoGradGuard no_grad;
  for (auto& [impl, e] : entries_) {
    e.copy = quantize_fp8(e.param.detach(), kFp8Forward, /*transposed=*/true);
    e.version = e.param._version();
  }
}

int64_t Fp8WeightCache::bytes() const {
  int64_t n = 0;
  for (const auto& [impl, e] : entries_)
    for (const auto* t : {&e.copy.q, &e.copy.qt, &e.copy.inv})
      n += t->numel() * static_cast<int64_t>(t->element_size());
  return n;
}

torch::Tensor fp8_linear(const torch::Tensor& x, const torch::Tensor& weight, const Fp8Tensor& w8,
                         const torch::Tensor& bias, c10::ScalarType out_dtype) {
  TORCH_CHECK(w8.q.scalar_type() == kFp8Forward, "fp8_linear: the weight copy is ", w8.q.scalar_type(), ", expected ",
              kFp8Forward);
  TORCH_CHECK(x.size(-1) == w8.q.size(1), "fp8_linear: x has ", x.size(-1), " features, the weight takes ",
              w8.q.size(1));
  TORCH_CHECK(w8.qt.defined() && w8.qt.size(0) == w8.q.size(1) && w8.qt.size(1) == w8.q.size(0),
              "fp8_linear: the weight copy needs its transpose (quantize_fp8 with transposed=true)");
  auto guard = no_autocast();
  std::optional<torch::Tensor> amax;  // apply() takes no undefined tensor
  if (auto a = take_amax(x); a.defined()) amax = a;
  auto y = Fp8Linear::apply(x, weight, w8.q, w8.qt, w8.inv, amax, static_cast<int64_t>(out_dtype));
  return bias.defined() ? y + bias.to(out_dtype) : y;
}

bool fp8_pays(int64_t in, int64_t out) {
  return in > 0 && out > 0 &&
         2.0 * static_cast<double>(in) * static_cast<double>(out) / static_cast<double>(in + out) >=
             static_cast<double>(kFp8MinHarmonicWidth);
}

std::string fp8_refusal(const std::string& gpu, int major, int minor, const std::vector<int64_t>& dims,
                        const std::string& key) {
  if (major * 10 + minor < 89)
    return fmt::format(
        "{}: fp8 needs a GPU of compute capability 8.9 or newer (Ada, Hopper and later have FP8 tensor cores), "
        "but {} is sm_{}{}; leave fp8 out of the list",
        key, gpu, major, minor);
  return fp8_shape_refusal(dims, key);
}

std::string fp8_shape_refusal(const std::vector<int64_t>& dims, const std::string& key) {
  for (const auto d : dims)
    if (d % kFp8Align != 0)
      return fmt::format(
          "{}: fp8 on CUDA needs the blocks' linear layers to have dimensions (d_model, inner_dim, 3 x inner_dim, "
          "the MLP's hidden size) that are multiples of {} (cuBLASLt's FP8 GEMM), but one is {}",
          key, kFp8Align, d);
  return "";
}

std::string fp8_refusal(const torch::Device& device, const std::vector<int64_t>& dims, const std::string& key) {
  if (!device.is_cuda()) return "";
#ifdef XSAGPT_CUDA
  const auto* p = at::cuda::getDeviceProperties(device.index() < 0 ? 0 : device.index());
  return fp8_refusal(p->name, p->major, p->minor, dims, key);
#else
  (void)dims;
  return key + ": fp8 on CUDA needs a build with CUDA";
#endif
}

}  // namespace xsagpt
