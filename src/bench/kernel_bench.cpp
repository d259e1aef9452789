#include "bench/kernel_bench.h"

#include "bench/timing.h"
#include "kernels/add_norm.h"
#include "kernels/add_norm_cuda.h"
#include "kernels/common.h"
#include "kernels/lm_head_loss.h"
#include "kernels/lm_head_loss_cuda.h"
#include "kernels/rope_qkv.h"
#include "kernels/rope_qkv_cuda.h"
#include "kernels/xsa_cuda.h"
#include "model/rope.h"
#include "model/xsa.h"
#include "util/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <regex>

namespace xsagpt {

namespace {

// Median over `iters` of the time per launch of `inner` launches in a row: one
// synchronisation per `inner` launches keeps the host's round trip out of
// sub-millisecond kernels.
double time_per_launch(const torch::Device& device, const std::function<void()>& launch, int64_t iters, int64_t inner) {
  launch();  // first launch: module load, allocator growth
  std::vector<double> ms;
  for (int64_t i = 0; i < iters; ++i) {
    sync_device(device);
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t j = 0; j < inner; ++j) launch();
    sync_device(device);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
                 static_cast<double>(inner));
  }
  std::nth_element(ms.begin(), ms.begin() + static_cast<std::ptrdiff_t>(ms.size() / 2), ms.end());
  return ms[ms.size() / 2];
}

double nbytes(const torch::Tensor& t) { return static_cast<double>(t.numel() * t.element_size()); }

double total_bytes(std::initializer_list<torch::Tensor> ts) {
  double b = 0;
  for (const auto& t : ts)
    if (t.defined()) b += nbytes(t);
  return b;
}

}  // namespace

MicroShape parse_micro_shape(const std::string& spec, const std::string& flag) {
  static const std::regex form(R"(([^:]+):([0-9]+)x([0-9]+))");
  std::smatch m;
  if (!std::regex_match(spec, m, form))
    throw ConfigError(flag + ": expected CONFIG:BATCHxSEQ_LEN (e.g. gpt2-124m:16x1024), got \"" + spec + "\"");
  MicroShape s{m[1], load_model_config(m[1]), std::stoll(m[2]), std::stoll(m[3])};
  if (s.batch < 1 || s.seq_len < 1) throw ConfigError(flag + ": batch and sequence length must be >= 1");
  return s;
}

MicroResult bench_kernels(const std::vector<MicroShape>& shapes, const torch::Device& device, int64_t iters,
                          int64_t inner) {
  const bool cuda = device.is_cuda() && cuda_kernels_built();
  const auto f32 = torch::TensorOptions().device(device).dtype(torch::kFloat32);
  const auto act = f32.dtype(device.is_cuda() ? torch::kBFloat16 : torch::kFloat32);  // the compute dtype
  MicroResult r;
  r.implementation = cuda ? "cuda" : "aten twin";
  const auto time = [&](const std::function<void()>& f) { return time_per_launch(device, f, iters, inner); };

  {  // the ceiling: a copy far larger than any cache
    const int64_t n = device.is_cuda() ? (int64_t{1} << 28) : (int64_t{1} << 23);
    const auto src = torch::rand({n}, f32), dst = torch::empty_like(src);
    r.copy_bytes = 2 * nbytes(src);
    r.copy_gb_per_s = r.copy_bytes / (time([&] { dst.copy_(src); }) * 1e6);
  }
  torch::manual_seed(0);
  for (const auto& s : shapes) {
    const auto& m = s.model;
    const int64_t N = s.batch * s.seq_len, d = m.d_model, H = m.n_head, D = m.head_dim;
    const auto label = fmt::format("{} {}x{}", s.config, s.batch, s.seq_len);
    const auto add = [&](const std::string& kernel, const std::string& dims, double bytes, double ms) {
      r.rows.push_back({kernel, label + " " + dims, bytes, ms});
    };

    {  // residual add + LayerNorm, the way every block boundary calls it
      const auto x = torch::randn({N, d}, f32), branch = torch::randn({N, d}, act);
      const auto w = 1 + 0.1 * torch::randn({d}, f32), b = 0.1 * torch::randn({d}, f32);
      auto x_out = torch::empty_like(x), h = torch::empty({N, d}, act);
      auto mean = torch::empty({N}, f32), rstd = torch::empty({N}, f32), no_amax = torch::Tensor();
      const auto forward = [&](bool in_registers) {
        if (cuda)
          add_norm_forward_cuda(x, branch, w, b, m.norm_eps, x_out, h, mean, rstd, no_amax, in_registers);
        else
          add_norm_forward_aten(x, branch, w, b, m.norm_eps, x_out, h, mean, rstd, no_amax);
      };
      const auto bytes = total_bytes({x, branch, w, b, x_out, h, mean, rstd});
      add("norm forward", fmt::format("d{}", d), bytes, time([&] { forward(false); }));
      // The norm_regs kernel's forward, beside the three-pass one it would replace.
      if (cuda) add("norm forward (rows in registers)", fmt::format("d{}", d), bytes, time([&] { forward(true); }));
      const auto dh = torch::randn({N, d}, act), dx_out = torch::randn({N, d}, f32);
      auto dx = torch::empty_like(x), dbranch = torch::empty({N, d}, act);
      auto dw = torch::empty_like(w), db = torch::empty_like(w);
      const bool fits = cuda && add_norm_backward_cuda_fits(d);
      const auto bwd = [&] {
        if (fits)
          add_norm_backward_cuda(dh, dx_out, x_out, mean, rstd, w, dx, dbranch, dw, db, no_amax);
        else
          add_norm_backward_aten(dh, dx_out, x_out, mean, rstd, w, dx, dbranch, dw, db, no_amax);
      };
      add("norm backward", fmt::format("d{}", d), total_bytes({dh, dx_out, x_out, mean, rstd, w, dx, dbranch, dw, db}),
          time(bwd));
    }
    {  // q, k, v out of the fused projection, q and k rotated
      auto [cos, sin] = rope_tables(s.seq_len, D, m.rope_theta, device);
      const auto qkv = torch::randn({s.batch, s.seq_len, 3 * H * D}, act);
      auto q = torch::empty({s.batch, s.seq_len, H, D}, act), k = torch::empty_like(q), v = torch::empty_like(q);
      const auto part = [&](const torch::Tensor& t, int64_t i) {
        return t.narrow(-1, i * H * D, H * D).view({s.batch, s.seq_len, H, D});
      };
      const auto fwd = [&] {
        if (cuda)
          rope_qkv_forward_cuda(qkv, cos, sin, q, k, v);
        else
          rope_qkv_aten(part(qkv, 0), part(qkv, 1), part(qkv, 2), cos, sin, /*inverse=*/false, q, k, v);
      };
      const auto dims = fmt::format("{}x{}", H, D);
      add("rope forward", dims, total_bytes({qkv, cos, sin, q, k, v}), time(fwd));
      auto dqkv = torch::empty_like(qkv), no_amax = torch::Tensor();
      const auto bwd = [&] {
        if (cuda) {
          rope_qkv_backward_cuda(q, k, v, cos, sin, dqkv, no_amax);
        } else {
          auto oq = part(dqkv, 0), ok = part(dqkv, 1), ov = part(dqkv, 2);
          rope_qkv_aten(q, k, v, cos, sin, /*inverse=*/true, oq, ok, ov);
        }
      };
      add("rope backward", dims, total_bytes({q, k, v, cos, sin, dqkv}), time(bwd));
    }
    {  // one chunk of LM-head rows: loss and gradient in one pass over the logits
      const int64_t n = std::min<int64_t>(N, 4096), V = m.vocab_size;
      auto logits = torch::randn({n, V}, act);
      const auto targets = torch::randint(0, V, {n}, f32.dtype(torch::kLong));
      const auto inv_count = torch::full({}, 1.0 / static_cast<double>(n), f32);
      auto losses = torch::empty({n}, f32);
      // Each launch overwrites the logits with their gradient and the next reads
      // that: finite values of the same size, so the work is the same.
      const auto launch = [&] {
        if (cuda)
          cross_entropy_rows_cuda(logits, targets, inv_count, losses, /*write_grad=*/true);
        else
          cross_entropy_rows_aten(logits, targets, inv_count, losses, /*write_grad=*/true);
      };
      add("loss rows", fmt::format("{}x{}", n, V), 2 * nbytes(logits) + total_bytes({targets, losses}), time(launch));
    }
    {  // XSA on (B, H, T, D), forward and backward, element-wise and 16-byte vectors
      const auto y = torch::randn({s.batch, H, s.seq_len, D}, act), v = torch::randn_like(y), g = torch::randn_like(y);
      const auto dims = fmt::format("{}x{}", H, D);
      if (cuda) {
        for (const bool wide : {false, true}) {
          // The kernel table's names (config/runtime.cpp), as train.kernels takes them.
          const std::string name = describe(Kernels{.xsa = wide ? XsaImpl::kFusedWide : XsaImpl::kFused});
          add(name + " forward", dims, 3 * nbytes(y), time([&] { xsa_forward_cuda(y, v, {}, m.xsa_eps, wide); }));
          add(name + " backward", dims, 5 * nbytes(y), time([&] { xsa_backward_cuda(y, v, g, {}, m.xsa_eps, wide); }));
        }
      } else {
        const auto yg = y.detach().requires_grad_(true), vg = v.detach().requires_grad_(true);
        add("xsa forward", dims, 3 * nbytes(y), time([&] {
              torch::NoGradGuard no_grad;
              exclude_self_value(y, v, m.xsa_eps);
            }));
        const auto z = exclude_self_value(yg, vg, m.xsa_eps);
        add("xsa backward", dims, 5 * nbytes(y), time([&] {
              torch::autograd::grad({z}, {yg, vg}, {g}, /*retain_graph=*/true);
            }));
      }
    }
  }
  return r;
}

nlohmann::json to_json(const MicroResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : r.rows)
    rows.push_back({{"kernel", row.kernel},
                    {"shape", row.shape},
                    {"bytes", row.bytes},
                    {"ms", row.ms},
                    {"gb_per_s", row.gb_per_s()},
                    {"of_copy", row.gb_per_s() / r.copy_gb_per_s}});
  return {{"implementation", r.implementation},
          {"copy_gb_per_s", r.copy_gb_per_s},
          {"copy_bytes", r.copy_bytes},
          {"rows", rows}};
}

}  // namespace xsagpt
