// How the model runs, as opposed to what it computes (config/model_config.h):
// which fused kernels stand in for ATen ops, what is recomputed in backward, how
// the LM-head loss is chunked, the compute dtype and the float32 matmul precision.
// Parsed once from the train.* keys (RunConfig::runtime) or a command's flags
// (bench --dtype, score/eval --precision) through the functions below, and handed
// to the model whole (GPTImpl::set_runtime), which runs every forward pass in it:
// no caller opens an autocast scope or sets TF32 itself. Nothing here changes the
// function the model computes beyond floating-point rounding, except the fp8
// kernel, which rounds the blocks' GEMM operands to 8-bit floats (kernels/
// fp8_linear.h) and is therefore never part of "fused". Configuration only: no
// torch here.
#pragma once

#include "config/schema.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace xsagpt {

// train.activation_checkpointing (model/recompute.h).
enum class Recompute { kNone, kMlp, kBlock };
inline constexpr std::array<std::pair<Recompute, const char*>, 3> kRecomputeNames{
    {{Recompute::kNone, "none"}, {Recompute::kMlp, "mlp"}, {Recompute::kBlock, "block"}}};
inline const auto& enum_names(Recompute) { return kRecomputeNames; }

// XSA's step (model/xsa.h): the custom autograd function on ATen ops, the same
// function as two CUDA kernels (element by element over a warp per row), the same
// kernels with 16-byte vector accesses, or composed of ordinary ops (bench's
// "before"). Which of them a GPU has validated: docs/benchmarks.md.
enum class XsaImpl { kOps, kFused, kFusedWide, kComposed };

// The fused implementations that replace ATen ops (src/kernels/), by train.kernels
// name. Each is a custom autograd function with a CUDA kernel and an ATen twin of
// the same arithmetic that runs elsewhere, so "fused" on a CPU is exact and tested.
struct Kernels {
  bool weights =
      false;          // bf16 weight copies made once per optimizer step; explicit bf16, no autocast (kernels/linear.h)
  bool norm = false;  // each residual add fused into the LayerNorm that follows it (kernels/add_norm.h)
  bool rope = false;  // q, k, v split into heads and RoPE in one pass (kernels/rope_qkv.h)
  bool loss = false;  // LM-head cross-entropy with its gradient made in the forward pass (kernels/lm_head_loss.h)
  XsaImpl xsa = XsaImpl::kOps;  // "xsa": XsaImpl::kFused, "xsa_wide": XsaImpl::kFusedWide (kernels/xsa_cuda.h)
  bool fp8 = false;  // the blocks' large linear layers as FP8 GEMMs, tensorwise scaled (kernels/fp8_linear.h)
  bool clip = false;            // the gradient clip's factor applied inside the fused AdamW's pass (train/step.h)
  bool gelu = false;  // the MLP as cuBLASLt GEMMs with the tanh GELU in their epilogues (kernels/gelu_mlp.h)
  bool fp8_all = false;  // with fp8: every block linear layer, whatever its size (small models' FP8 arithmetic)
  bool norm_regs = false;  // with norm: its forward holds each row in registers from one read (kernels/add_norm.h)

  bool operator==(const Kernels&) const = default;
};

// The names train.kernels takes, in the order describe() lists them, and the help
// text of the key; both come from one table in runtime.cpp, a row per kernel.
std::vector<std::string> kernel_names();
const char* kernels_help();

// The same table row by row, for what lists the kernels elsewhere (`xsagpt config
// --json`, which the scripts under scripts/bench/ read, and bench's --kernels help):
// the name, what it fuses, whether "auto" (on CUDA) and "fused" take it, and the
// CUDA tests that speak for it (gtest filter patterns: its own suite or tests, and
// for a kernel in "fused" the whole-model tests, which run that set).
struct KernelInfo {
  std::string name, help;
  bool in_auto = false, in_fused = false;
  std::vector<std::string> tests;
};
std::vector<KernelInfo> kernel_table();

// A command's flag for train.activation_checkpointing (bench --step-recompute, info
// --recompute): "none", "mlp" or "block"; ConfigError naming `key` otherwise.
Recompute parse_recompute(const std::string& mode, const std::string& key = "train.activation_checkpointing");
inline const char* name(Recompute r) { return schema::enum_name(r); }

// train.kernels: "auto" (the kernels validated on a GPU so far, on CUDA; the ATen
// twins measured faster on a CPU, elsewhere), "aten" (none), "fused" (all that keep the model's arithmetic: all
// but fp8, and gelu, which needs a model with model.gelu "tanh") or a
// comma-separated list of names, in which "fused" and "auto" stand for their
// sets ("fused,fp8"). Throws ConfigError naming `key` for anything else.
Kernels parse_kernels(const std::string& spec, bool cuda, const std::string& key = "train.kernels");
// The chosen kernels as "weights,norm,..." ("aten" when none).
std::string describe(const Kernels& k);

// train.precision, bench --dtype, score/eval --precision: "auto" (bf16 on CUDA,
// float32 elsewhere), "bf16" or "fp32". Whether to compute in bf16; ConfigError
// naming `key` for anything else.
bool parse_precision(const std::string& spec, bool cuda, const std::string& key = "train.precision");

struct Runtime {
  Kernels kernels;
  Recompute recompute = Recompute::kNone;
  int64_t loss_chunk = 0;  // LM-head loss this many tokens at a time (0: all at once)
  bool bf16 = false;       // compute in bfloat16 (float32 weights, grads and AdamW state)
  // float32 matmuls on CUDA may use TF32 tensor cores: what a run's runtime asks
  // for on CUDA (runtime_of in config/run_config.h; MFU counts against the TF32
  // peak). A process-wide ATen switch, set when a model takes this runtime.
  bool tf32 = false;

  // bf16 through ATen's autocast, unless the weights kernel computes in bf16 explicitly.
  bool autocast() const { return bf16 && !kernels.weights; }
  bool operator==(const Runtime&) const = default;
};

}  // namespace xsagpt
