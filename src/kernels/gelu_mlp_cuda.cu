// cuBLASLt calls of kernels/gelu_mlp_cuda.h: host code only (no device code of
// our own), compiled with the other CUDA sources so that builds without the CUDA
// kernels neither include nor link cuBLASLt (kernels/stubs.cpp stands in).
//
// Layout (cuBLASLt is column-major): a contiguous row-major (R, C) tensor is the
// column-major (C, R) matrix with leading dimension C. With N tokens, d = d_model
// and H the hidden width:
//   up:   pre^T (H x N) = W1 (H x d) . x^T (d x N)     A = w1c read as (d x H), op T
//                                                    B = x2 read as (d x N), op N
//   down: dpre^T (H x N) = W2^T (H x d) . dy^T (d x N) A = w2c read as (H x d), op N
//                                                    B = g2 read as (d x N), op N
// so the output's rows are the hidden units: the bias (and its gradient) is a
// vector over the rows, as the epilogue defines it, and the auxiliary matrix pre
// has the output's layout, leading dimension H (cuBLASLt: divisible by 8, checked
// by gelu_mlp_cuda_fits before either call).
#include "kernels/gelu_mlp_cuda.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/util/Exception.h>
#include <cublasLt.h>

#include <cstdint>

namespace xsagpt {

namespace {

void lt_check(cublasStatus_t s, const char* what) {
  TORCH_CHECK(s == CUBLAS_STATUS_SUCCESS, "gelu_mlp (cuBLASLt): ", what, " failed: ", cublasLtGetStatusString(s));
}

// The descriptors of one call, destroyed with it.
struct LtCall {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtCall() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

template <class T>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value, const char* what) {
  lt_check(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)), what);
}

// The largest power of two (at most 256) that divides the address: the heuristic
// assumes 256-byte aligned operands unless told otherwise, and may otherwise pick
// a kernel whose vector loads the data cannot take (ATen's own cuBLASLt calls do this too).
uint32_t alignment(const void* p) {
  uint32_t a = 1;
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  while (a < 256 && addr % (2 * a) == 0) a *= 2;
  return a;
}

cudaDataType_t lt_type(const at::Tensor& t) {
  TORCH_CHECK(t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf,
              "gelu_mlp (cuBLASLt): ", t.scalar_type(), " is not bf16 or half");
  return t.scalar_type() == at::kBFloat16 ? CUDA_R_16BF : CUDA_R_16F;
}

// D (m x n, column-major, ld m) = op(A) . B with `epilogue`, float32 accumulation;
// A is (k x m) read transposed when a_t, else (m x k); B is (k x n); `bias` the
// epilogue's bias (or bias gradient) vector of length m, `aux` its (m x n) auxiliary matrix.
void lt_matmul(cublasLtEpilogue_t epilogue, bool a_t, int64_t m, int64_t n, int64_t k, const at::Tensor& A,
               const at::Tensor& B, at::Tensor& D, void* bias, void* aux, cudaDataType_t type) {
  LtCall c;
  lt_check(cublasLtMatmulDescCreate(&c.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t op_a = a_t ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = CUBLAS_OP_N;
  set_desc(c.desc, CUBLASLT_MATMUL_DESC_TRANSA, op_a, "TRANSA");
  set_desc(c.desc, CUBLASLT_MATMUL_DESC_TRANSB, op_b, "TRANSB");
  set_desc(c.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue, "EPILOGUE");
  if (bias) set_desc(c.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias, "BIAS_POINTER");
  set_desc(c.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux, "EPILOGUE_AUX_POINTER");
  set_desc(c.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, m, "EPILOGUE_AUX_LD");
  lt_check(cublasLtMatrixLayoutCreate(&c.a, type, a_t ? k : m, a_t ? m : k, a_t ? k : m), "layout A");
  lt_check(cublasLtMatrixLayoutCreate(&c.b, type, k, n, k), "layout B");
  lt_check(cublasLtMatrixLayoutCreate(&c.d, type, m, n, m), "layout D");

  const uint64_t workspace_bytes = at::cuda::getCUDABlasLtWorkspaceSize();
  void* workspace = at::cuda::getCUDABlasLtWorkspace();
  lt_check(cublasLtMatmulPreferenceCreate(&c.pref), "cublasLtMatmulPreferenceCreate");
  auto pref = [&](cublasLtMatmulPreferenceAttributes_t attr, auto value, const char* what) {
    lt_check(cublasLtMatmulPreferenceSetAttribute(c.pref, attr, &value, sizeof(value)), what);
  };
  pref(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, workspace_bytes, "MAX_WORKSPACE_BYTES");
  pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment(A.data_ptr()), "MIN_ALIGNMENT_A_BYTES");
  pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment(B.data_ptr()), "MIN_ALIGNMENT_B_BYTES");
  pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignment(D.data_ptr()), "MIN_ALIGNMENT_C_BYTES");
  pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignment(D.data_ptr()), "MIN_ALIGNMENT_D_BYTES");

  cublasLtHandle_t handle = at::cuda::getCurrentCUDABlasLtHandle();
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  lt_check(cublasLtMatmulAlgoGetHeuristic(handle, c.desc, c.a, c.b, c.d, c.d, c.pref, 1, &heuristic, &found),
           "cublasLtMatmulAlgoGetHeuristic");
  TORCH_CHECK(found > 0, "gelu_mlp (cuBLASLt): no algorithm for a ", m, "x", n, "x", k, " GEMM with epilogue ",
              static_cast<int>(epilogue), "; leave gelu out of train.kernels");
  const float alpha = 1.0f, beta = 0.0f;
  lt_check(
      cublasLtMatmul(handle, c.desc, &alpha, A.data_ptr(), c.a, B.data_ptr(), c.b, &beta, D.data_ptr(), c.d,
                     D.data_ptr(), c.d, &heuristic.algo, workspace, workspace_bytes, at::cuda::getCurrentCUDAStream()),
      "cublasLtMatmul");
}

void check_operands(const std::initializer_list<const at::Tensor*>& ts, const at::Tensor& like) {
  for (const auto* t : ts)
    TORCH_CHECK(
        t->is_cuda() && t->is_contiguous() && t->scalar_type() == like.scalar_type() && t->device() == like.device(),
        "gelu_mlp (cuBLASLt): operands must be contiguous ", like.scalar_type(), " tensors on ", like.device());
}

}  // namespace

void gelu_up_cuda(const at::Tensor& x2, const at::Tensor& w1c, const at::Tensor& b1c, at::Tensor& pre, at::Tensor& h) {
  const int64_t N = x2.size(0), d = x2.size(1), H = w1c.size(0);
  check_operands({&x2, &w1c, &pre, &h}, x2);
  if (b1c.defined()) check_operands({&b1c}, x2);
  TORCH_CHECK(w1c.size(1) == d && pre.size(0) == N && pre.size(1) == H && h.sizes() == pre.sizes(),
              "gelu_up_cuda: shapes do not chain");
  TORCH_CHECK(H % 8 == 0, "gelu_up_cuda: the hidden width ", H, " is not a multiple of 8 (cuBLASLt's aux matrix)");
  const auto epilogue = b1c.defined() ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
  lt_matmul(epilogue, /*a_t=*/true, H, N, d, w1c, x2, h, b1c.defined() ? b1c.data_ptr() : nullptr, pre.data_ptr(),
            lt_type(x2));
}

void dgelu_down_cuda(const at::Tensor& g2, const at::Tensor& w2c, const at::Tensor& pre, at::Tensor& dpre,
                     at::Tensor& db1) {
  const int64_t N = g2.size(0), d = g2.size(1), H = w2c.size(1);
  check_operands({&g2, &w2c, &pre, &dpre}, g2);
  if (db1.defined()) check_operands({&db1}, g2);
  TORCH_CHECK(w2c.size(0) == d && pre.size(0) == N && pre.size(1) == H && dpre.sizes() == pre.sizes() &&
                  (!db1.defined() || db1.numel() == H),
              "dgelu_down_cuda: shapes do not chain");
  TORCH_CHECK(H % 8 == 0, "dgelu_down_cuda: the hidden width ", H, " is not a multiple of 8 (cuBLASLt's aux matrix)");
  const auto epilogue = db1.defined() ? CUBLASLT_EPILOGUE_DGELU_BGRAD : CUBLASLT_EPILOGUE_DGELU;
  lt_matmul(epilogue, /*a_t=*/false, H, N, d, w2c, g2, dpre, db1.defined() ? db1.data_ptr() : nullptr,
            const_cast<void*>(pre.data_ptr()), lt_type(g2));
}

}  // namespace xsagpt
