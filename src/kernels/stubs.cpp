// Builds without the CUDA kernels (no CUDA LibTorch, no nvcc, or XSAGPT_KERNELS=OFF;
// CMakeLists.txt compiles this file only then): the entry points exist, so the code
// that chooses between kernel and ATen links; use_cuda_kernel() is false there, so
// none of them is ever called.
#include "kernels/add_norm_cuda.h"
#include "kernels/common.h"
#include "kernels/fp8_cast_cuda.h"
#include "kernels/gelu_amax_cuda.h"
#include "kernels/gelu_mlp_cuda.h"
#include "kernels/lm_head_loss_cuda.h"
#include "kernels/rope_qkv_cuda.h"
#include "kernels/xsa_cuda.h"

namespace xsagpt {

bool cuda_kernels_built() { return false; }

namespace {
[[noreturn]] void not_built() { TORCH_CHECK(false, "xsagpt was built without its CUDA kernels"); }
}  // namespace

torch::Tensor xsa_forward_cuda(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&, double, bool) {
  not_built();
}
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> xsa_backward_cuda(const torch::Tensor&, const torch::Tensor&,
                                                                          const torch::Tensor&, const torch::Tensor&,
                                                                          double, bool) {
  not_built();
}
void rope_qkv_forward_cuda(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&, torch::Tensor&,
                           torch::Tensor&, torch::Tensor&) {
  not_built();
}
void rope_qkv_backward_cuda(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                            const torch::Tensor&, torch::Tensor&, torch::Tensor&) {
  not_built();
}
void add_norm_forward_cuda(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                           double, torch::Tensor&, torch::Tensor&, torch::Tensor&, torch::Tensor&, torch::Tensor&,
                           bool) {
  not_built();
}
void add_norm_backward_cuda(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                            const torch::Tensor&, const torch::Tensor&, torch::Tensor&, torch::Tensor&, torch::Tensor&,
                            torch::Tensor&, torch::Tensor&) {
  not_built();
}
bool add_norm_backward_cuda_fits(int64_t) { return false; }
void fp8_scale_cast_cuda(const torch::Tensor&, const torch::Tensor&, double, torch::Tensor&, torch::Tensor&) {
  not_built();
}
void fp8_scale_cast_transpose_cuda(const torch::Tensor&, const torch::Tensor&, double, torch::Tensor&, torch::Tensor&,
                                   torch::Tensor&) {
  not_built();
}
void gelu_amax_cuda(const at::Tensor&, at::Tensor&, at::Tensor&) { not_built(); }
void gelu_backward_amax_cuda(const at::Tensor&, const at::Tensor&, at::Tensor&, at::Tensor&) { not_built(); }
void gelu_up_cuda(const at::Tensor&, const at::Tensor&, const at::Tensor&, at::Tensor&, at::Tensor&) { not_built(); }
void dgelu_down_cuda(const at::Tensor&, const at::Tensor&, const at::Tensor&, at::Tensor&, at::Tensor&) {
  not_built();
}
void cross_entropy_rows_cuda(torch::Tensor&, const torch::Tensor&, const torch::Tensor&, torch::Tensor&, bool) {
  not_built();
}

}  // namespace xsagpt
