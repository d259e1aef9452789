// `xsagpt bench`: time and peak memory of one transformer block, forward plus
// backward, with XSA off and on, over sequence lengths and widths, and of a whole
// training step; prints the XSA/SA ratios and writes JSON. See bench/block_bench.h.
// With --profile, also where the step's time goes (bench/step_profile.h).
// Defaults follow the paper on a GPU (batch 32, bf16) and are small on a CPU.
#include "bench/block_bench.h"
#include "bench/kernel_bench.h"
#include "bench/step_profile.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "config/model_config.h"
#include "config/runtime.h"
#include "kernels/common.h"
#include "kernels/fp8_linear.h"
#include "model/counts.h"
#include "train/mfu.h"
#include "util/atomic_file.h"
#include "util/device.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <ctime>
#include <iostream>
#include <sstream>

namespace xsagpt::cli {

namespace {

std::vector<int64_t> int_list(const std::string& s, const std::string& flag) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      const auto v = std::stoll(item, &used);
      if (used != item.size() || v <= 0) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      throw ConfigError(flag + ": expected positive integers separated by commas, got \"" + s + "\"");
    }
  }
  if (out.empty()) throw ConfigError(flag + ": empty list");
  return out;
}

std::vector<std::string> str_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

std::string machine(const torch::Device& d) {
  if (d.is_cuda()) return device_name(d);
  return fmt::format("{} ({})", device_name(d), cpu_threads_description());
}

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// A table row: label column(s), then time, time ratio to the first variant, peak
// memory, memory ratio to the first variant, one cell per variant; cells as wide
// as their header.
struct Table {
  std::vector<std::string> headers;
  std::string header_line(const std::string& first) const {
    std::string h = first;
    for (const auto& c : headers) h += fmt::format("  {:>{}}", c, std::max<size_t>(8, c.size()));
    return h;
  }
  std::string cell(size_t i, const std::string& text) const {
    return fmt::format("  {:>{}}", text, std::max<size_t>(8, headers[i].size()));
  }
};

Table make_table(const std::vector<std::string>& variants) {
  Table t;
  for (const auto& v : variants) t.headers.push_back(v + " ms");
  for (size_t i = 1; i < variants.size(); ++i) t.headers.push_back(variants[i] + "/" + variants[0]);
  for (const auto& v : variants) t.headers.push_back(v + " MiB");
  for (size_t i = 1; i < variants.size(); ++i) t.headers.push_back(variants[i] + "/" + variants[0]);
  return t;
}

// Results and ratios to the first variant into j; the table cells onto row.
void add_results(json& j, std::string& row, const Table& table, const std::vector<std::string>& variants,
                 const Results& r) {
  j["results"] = json::object();
  j["ratios"] = json::object();
  j["baseline"] = variants[0];
  const auto& base = r.at(variants[0]);
  std::vector<std::string> time, time_ratio, mem, mem_ratio;
  for (size_t i = 0; i < variants.size(); ++i) {
    const auto& v = variants[i];
    const auto& t = r.at(v);
    j["results"][v] = to_json(t);
    time.push_back(fmt::format("{:.2f}", t.median_ms));
    mem.push_back(fmt::format("{:.1f}", mib(t.peak_bytes)));
    if (i == 0) continue;
    const double tr = t.median_ms / base.median_ms;
    const double mr =
        base.peak_bytes > 0 ? static_cast<double>(t.peak_bytes) / static_cast<double>(base.peak_bytes) : NAN;
    j["ratios"][v] = {{"time", tr}, {"memory", std::isfinite(mr) ? json(mr) : json(nullptr)}};
    if (t.round_ms.size() > 1) {  // paired within each round: drift between rounds cancels
      std::vector<double> rounds;
      for (size_t k = 0; k < t.round_ms.size(); ++k) rounds.push_back(t.round_ms[k] / base.round_ms[k]);
      j["ratios"][v]["time_rounds"] = rounds;
    }
    time_ratio.push_back(fmt::format("{:.3f}", tr));
    mem_ratio.push_back(fmt::format("{:.3f}", mr));
  }
  size_t i = 0;
  for (const auto* group : {&time, &time_ratio, &mem, &mem_ratio})
    for (const auto& c : *group) row += table.cell(i++, c);
}

// The flags, checked; each error names its flag. The training step runs train's
// defaults but for what the flags set (config/run_config.h: runtime_of).
BenchOptions read_options(const cxxopts::ParseResult& args) {
  BenchOptions o;
  o.device = device_option(args);
  const bool gpu = o.device.is_cuda();
  o.train.precision = args["dtype"].as<std::string>();
  parse_precision(o.train.precision, gpu, "--dtype");
  o.train.kernels = args["kernels"].as<std::string>();
  parse_kernels(o.train.kernels, gpu, "--kernels");
  o.train.activation_checkpointing = parse_recompute(args["step-recompute"].as<std::string>(), "--step-recompute");
  o.train.loss_chunk = args["step-loss-chunk"].as<int64_t>();
  if (o.train.loss_chunk < 0) throw ConfigError("--step-loss-chunk: must be >= 0");
  o.runtime = runtime_of(o.train, gpu);
  o.batch = args.count("batch") ? args["batch"].as<int64_t>() : (gpu ? 32 : 4);
  o.head_dim = args.count("head-dim") ? args["head-dim"].as<int64_t>() : (gpu ? 128 : 64);
  o.warmup = args["warmup"].as<int64_t>();
  o.iters = args["iters"].as<int64_t>();
  o.variants = str_list(args.count("variants") ? args["variants"].as<std::string>()
                                               : (gpu ? "sa,xsa,xsa-ops,xsa-autograd" : "sa,xsa,xsa-autograd"));
  if (o.batch < 1) throw ConfigError("--batch: must be >= 1");
  if (o.head_dim < 2 || o.head_dim % 2) throw ConfigError("--head-dim: must be even and >= 2 (RoPE rotates pairs)");
  o.accumulation = args["step-accum"].as<int64_t>();
  if (o.accumulation < 1) throw ConfigError("--step-accum: must be >= 1");
  o.repeat = args["repeat"].as<int64_t>();
  if (o.repeat < 1) throw ConfigError("--repeat: must be >= 1");
  if (o.warmup < 0 || o.iters < 1) throw ConfigError("--warmup must be >= 0 and --iters >= 1");
  if (o.variants.empty()) throw ConfigError("--variants: empty list");
  for (size_t i = 0; i < o.variants.size(); ++i) {
    // rejects unknown names and kernels, and fp8 on a GPU without FP8 GEMMs
    if (variant_runtime(o.runtime, o.variants[i], gpu).kernels.fp8)
      if (auto why = fp8_refusal(o.device, {}, "--variants " + o.variants[i]); !why.empty()) throw ConfigError(why);
    if (parse_bench_variant(o.variants[i]).xsa_impl == XsaImpl::kFused && !(gpu && cuda_kernels_built()))
      throw ConfigError("--variants: xsa-fused needs a CUDA device and a build with the CUDA kernels");
    if (std::find(o.variants.begin(), o.variants.begin() + i, o.variants[i]) != o.variants.begin() + i)
      throw ConfigError("--variants: \"" + o.variants[i] + "\" given twice");
  }
  return o;
}

// The block grid: one table row per (width, T).
json run_block_grid(const BenchOptions& o, const Table& table, const std::vector<int64_t>& widths,
                    const std::vector<int64_t>& seq_lens, const std::string& machine_name) {
  json rows = json::array();
  std::cout << fmt::format(
                   "block forward+backward: {}, {}, kernels {}, batch {}, head_dim {}, median of {} (ms; peak MiB)\n",
                   machine_name, o.runtime.bf16 ? "bf16" : "fp32", describe(o.runtime.kernels), o.batch, o.head_dim,
                   o.iters)
            << table.header_line(fmt::format("{:>6} {:>6}", "T", "width")) << "\n";
  for (auto w : widths) {
    for (auto T : seq_lens) {
      const auto r = bench_block(o, T, w);
      json j = {{"seq_len", T}, {"d_model", w}, {"n_head", w / o.head_dim}};
      std::string row = fmt::format("{:>6} {:>6}", T, w);
      add_results(j, row, table, o.variants, r);
      rows.push_back(j);
      std::cout << row << std::endl;
    }
  }
  return rows;
}

// The training step of model config `ref` at micro-batch B x T: times, throughput,
// MFU and the memory estimate beside the measured peaks.
json run_train_step(const BenchOptions& o, const Table& table, const std::string& ref, int64_t B, int64_t T) {
  const bool gpu = o.device.is_cuda();
  const auto model = load_model_config(ref);
  const auto r = bench_train_step(o, model, B, T);
  const double flops = flops_per_token(model, T);
  json j = {{"config", ref},
            {"model", to_json(model)},
            {"micro_batch", B},
            {"seq_len", T},
            {"accumulation", o.accumulation},
            {"recompute", name(o.runtime.recompute)},
            {"loss_chunk", o.runtime.loss_chunk},
            {"flops_per_token", flops}};
  std::string row = fmt::format("{:>13}", fmt::format("{}x{}", B, T));
  add_results(j, row, table, o.variants, r);
  // Throughput and model FLOPs utilisation (6N + attention, model/counts.h)
  // against the dense peak of the GPU present (train/mfu.h); none on a CPU.
  const auto peak = gpu ? gpu_peak_flops(device_name(o.device), o.runtime.bf16) : std::nullopt;
  std::string rates;
  for (const auto& v : o.variants) {
    const double tok_s = static_cast<double>(B * T * o.accumulation) / (r.at(v).median_ms / 1e3);
    const double mfu = peak ? tok_s * flops / *peak : NAN;
    j["results"][v]["tokens_per_s"] = tok_s;
    j["results"][v]["mfu"] = peak ? json(mfu) : json(nullptr);
    rates += fmt::format("  {} {:.0f} tokens/s, MFU {}", v, tok_s, peak ? fmt::format("{:.1f}%", mfu * 100) : "n/a");
    if (r.at(v).cpu_median_ms > 0) rates += fmt::format(", CPU time {:.2f} ms a step", r.at(v).cpu_median_ms);
  }
  // The estimate `xsagpt info` prints, less what exists before the step (weights
  // and AdamW state): comparable with the measured peaks above.
  const auto est = estimate_training_memory(model, B, T, MemoryOptions{o.runtime});
  const double est_step = est.total() - est.params_bytes - est.optimizer_bytes - est.weight_copies_bytes;
  j["estimated_peak_bytes"] = est_step;
  rates += fmt::format("  (estimated peak {:.1f} MiB)", mib(static_cast<int64_t>(est_step)));
  // The optimizer's share of the step: AdamW, and Muon (Newton-Schulz included) in its place.
  const auto opt = bench_optimizer_step(o, model);
  for (const auto& [name, t] : opt) j["optimizer_step"][name] = to_json(t);
  rates += fmt::format("\n  optimizer step alone: AdamW {:.2f} ms, Muon + AdamW {:.2f} ms (train.optimizer=muon)",
                       opt.at(name(Optimizer::kAdamW)).median_ms, opt.at(name(Optimizer::kMuon)).median_ms);
  std::cout << fmt::format(
                   "\ntraining step (forward, backward, clip, AdamW) of {}: {} layers, d_model {}, {}, "
                   "kernels {}, checkpointing {}, loss chunk {}, {} micro-batch(es)\n",
                   ref, model.n_layer, model.d_model, o.runtime.bf16 ? "bf16" : "fp32", describe(o.runtime.kernels),
                   name(o.runtime.recompute), o.runtime.loss_chunk, o.accumulation)
            << table.header_line(fmt::format("{:>13}", "batch x T")) << "\n"
            << row << "\n"
            << rates.substr(2) << "\n";
  return j;
}

// Each fused kernel alone against a device copy (bench/kernel_bench.h).
json run_micro(const std::vector<std::string>& specs, const BenchOptions& o, const std::string& machine_name) {
  std::vector<MicroShape> shapes;
  for (const auto& spec : specs) shapes.push_back(parse_micro_shape(spec, "--micro"));
  const auto r = bench_kernels(shapes, o.device, o.iters, /*inner=*/10);
  std::cout << fmt::format(
      "fused kernels alone ({}): {}; device copy {:.0f} GB/s (read + written, {:.0f} MiB); median of {}\n"
      "{:<16} {:<34} {:>10} {:>10} {:>9} {:>8}\n",
      r.implementation, machine_name, r.copy_gb_per_s, mib(static_cast<int64_t>(r.copy_bytes)), o.iters, "kernel",
      "shape", "MiB moved", "ms", "GB/s", "of copy");
  for (const auto& row : r.rows)
    std::cout << fmt::format("{:<16} {:<34} {:>10.1f} {:>10.4f} {:>9.0f} {:>7.0f}%\n", row.kernel, row.shape,
                             mib(static_cast<int64_t>(row.bytes)), row.ms, row.gb_per_s(),
                             100 * row.gb_per_s() / r.copy_gb_per_s);
  return to_json(r);
}

// Where the training step of each variant spends its time (bench/step_profile.h):
// per variant, the categories and the kernels (ops on a CPU) that take the most.
json run_step_profile(const BenchOptions& o, const std::string& ref, int64_t B, int64_t T, int64_t steps) {
  constexpr size_t kTop = 15;  // the table's kernels; the JSON holds them all
  const auto model = load_model_config(ref);
  const auto profiles = profile_train_step(o, model, B, T, steps);
  json j = {{"config", ref}, {"micro_batch", B}, {"seq_len", T}, {"accumulation", o.accumulation}, {"results", {}}};
  for (const auto& v : o.variants) {
    const auto& p = profiles.at(v);
    j["results"][v] = to_json(p);
    auto pct = [&](double ms) { return p.total_ms > 0 ? 100 * ms / p.total_ms : 0.0; };
    std::cout << fmt::format("\nprofile of the training step of {} ({}x{}), {}, kernels {}: {}, ms per step over {} steps\n",
                             ref, B, T, v, describe(variant_runtime(o.runtime, v, o.device.is_cuda()).kernels),
                             p.measure, p.steps)
              << fmt::format("  {:<12} {:>10} {:>7}\n", "category", "ms", "share");
    for (const auto* c : kProfileCategories)
      std::cout << fmt::format("  {:<12} {:>10.3f} {:>6.1f}%\n", c, p.categories.at(c), pct(p.categories.at(c)));
    std::cout << fmt::format("  {:<12} {:>10.3f} {:>6.1f}%  (step wall time without the profiler: {:.3f} ms)\n",
                             "total", p.total_ms, 100.0, p.wall_ms)
              << fmt::format("  {:<64} {:<11} {:>10} {:>7} {:>7}\n", "top kernels", "category", "ms", "share",
                             "calls");
    for (size_t k = 0; k < std::min(kTop, p.kernels.size()); ++k) {
      const auto& e = p.kernels[k];
      const auto name = e.name.size() > 64 ? e.name.substr(0, 61) + "..." : e.name;
      std::cout << fmt::format("  {:<64} {:<11} {:>10.3f} {:>6.1f}% {:>7.0f}\n", name, e.category, e.ms, pct(e.ms),
                               e.calls);
    }
  }
  return j;
}

}  // namespace

int bench(int argc, char** argv) {
  std::string kernel_list;  // from the table (config/runtime.h), so the help lists every kernel there is
  for (const auto& k : kernel_names()) kernel_list += (kernel_list.empty() ? "" : ",") + k;
  cxxopts::Options opts(
      "xsagpt bench",
      "Time and peak memory of one transformer block (forward+backward) with XSA off and on over\n"
      "sequence lengths and widths, and of one training step (the step `xsagpt train` runs); ratios\n"
      "to the first variant. GPU defaults as the paper (batch 32, bf16); CPU defaults small.\n"
      "Variants: sa, xsa (XSA's step as --kernels chooses), xsa-ops (its custom autograd function on\n"
      "ATen ops), xsa-fused (the CUDA kernels), xsa-autograd (ordinary ops); NAME@K runs NAME with\n"
      "train.kernels K ('+' between kernel names), e.g. sa@aten,sa@fused,xsa@fused,xsa@fused+fp8.\n"
      "--profile: the step's time by kernel and by category (device kernel time on CUDA, CPU op self\n"
      "time on a CPU), per variant; the JSON's profile.results.VARIANT has total_ms, wall_ms,\n"
      "categories (name -> ms per step, summing to total_ms) and every kernel by time.");
  // clang-format off
  opts.add_options()
    ("dtype", "auto (bf16 on CUDA, fp32 on CPU), bf16 (autocast) or fp32", cxxopts::value<std::string>()->default_value("auto"))
    ("b,batch", "sequences per block forward (default: 32 on GPU, 4 on CPU)", cxxopts::value<int64_t>())
    ("t,seq-lens", "sequence lengths (default: 1024,2048,4096,8192 on GPU; 128,256,512 on CPU)", cxxopts::value<std::string>())
    ("w,widths", "block widths d_model (default: 1024,2048 on GPU; 128,256 on CPU)", cxxopts::value<std::string>())
    ("head-dim", "head width; n_head = width / head-dim (default: 128 on GPU, 64 on CPU)", cxxopts::value<int64_t>())
    ("variants", "comma-separated: sa, xsa, xsa-ops, xsa-fused, xsa-autograd, each optionally NAME@KERNELS (default: sa,xsa,xsa-ops,xsa-autograd on GPU; sa,xsa,xsa-autograd on CPU)", cxxopts::value<std::string>())
    ("kernels", "train.kernels for every variant without @: auto, aten, fused or a list (" + kernel_list + ")", cxxopts::value<std::string>()->default_value("auto"))
    ("warmup", "untimed iterations first", cxxopts::value<int64_t>()->default_value("3"))
    ("iters", "timed iterations (median reported)", cxxopts::value<int64_t>()->default_value("10"))
    ("step-config", "model config for the training-step benchmark (default: gpt2-124m on GPU, tiny on CPU)", cxxopts::value<std::string>())
    ("step-batch", "micro-batch of the training step (default: 16 on GPU, 8 on CPU)", cxxopts::value<int64_t>())
    ("step-seq-len", "sequence length of the training step (default: 1024 on GPU, 128 on CPU)", cxxopts::value<int64_t>())
    ("step-recompute", "activation checkpointing of the training step: none, mlp or block", cxxopts::value<std::string>()->default_value("none"))
    ("step-loss-chunk", "LM-head loss in chunks of this many tokens in the training step (0: whole)", cxxopts::value<int64_t>()->default_value("0"))
    ("step-accum", "micro-batches per optimizer step in the training step (gradient accumulation)", cxxopts::value<int64_t>()->default_value("1"))
    ("repeat", "rounds of the training step over all variants, each built afresh; JSON gets each round's median and each round's ratio to the first variant", cxxopts::value<int64_t>()->default_value("1"))
    ("no-step", "skip the training-step benchmark")
    ("no-block", "skip the block grid")
    ("profile", "also profile the training step of each variant (LibTorch's Kineto profiler): its time by kernel and by category (gemm, FP8's included; quantize, the casts, amax and transposes that make FP8's operands; attention, XSA's kernels included; norm; elementwise, RoPE, GELU and the loss's softmax included; optimizer, the gradient clip included; copies, casts and fills; other), as device kernel time on CUDA and CPU op self time on a CPU, beside the step's wall time; runs with --no-step too")
    ("profile-steps", "steps profiled after the warm-up (figures are per step)", cxxopts::value<int64_t>()->default_value("3"))
    ("micro", "instead of the block grid and the step: each fused kernel alone (norm, rope, loss, xsa; forward and backward) as GB/s against a device copy, at CONFIG:BxT shapes, comma-separated (e.g. gpt2-124m:16x1024,paper-0.7b:8x2048); ATen twins where the CUDA kernels cannot run", cxxopts::value<std::string>())
    ("json", "write the results to this JSON file", cxxopts::value<std::string>());
  // clang-format on
  add_device_options(opts);
  const auto parsed = parse_command(opts, argc, argv);
  if (!parsed) return 0;
  const auto& args = *parsed;
  setup_threads(args);
  const BenchOptions o = read_options(args);
  const bool gpu = o.device.is_cuda();
  const Table table = make_table(o.variants);
  const auto seq_lens = int_list(
      args.count("seq-lens") ? args["seq-lens"].as<std::string>() : (gpu ? "1024,2048,4096,8192" : "128,256,512"),
      "--seq-lens");
  const auto widths =
      int_list(args.count("widths") ? args["widths"].as<std::string>() : (gpu ? "1024,2048" : "128,256"), "--widths");
  for (auto w : widths)
    if (w % o.head_dim)
      throw ConfigError(fmt::format("--widths: {} is not a multiple of --head-dim {}", w, o.head_dim));
  const std::string step_ref =
      args.count("step-config") ? args["step-config"].as<std::string>() : (gpu ? "gpt2-124m" : "tiny");
  const int64_t B = args.count("step-batch") ? args["step-batch"].as<int64_t>() : (gpu ? 16 : 8);
  const int64_t T = args.count("step-seq-len") ? args["step-seq-len"].as<int64_t>() : (gpu ? 1024 : 128);
  if (B < 1 || T < 1) throw ConfigError("--step-batch and --step-seq-len: must be >= 1");
  const bool profile = args.count("profile") > 0;
  const int64_t profile_steps = args["profile-steps"].as<int64_t>();
  if (profile_steps < 1) throw ConfigError("--profile-steps: must be >= 1");
  if (profile && args.count("micro")) throw ConfigError("--profile: profiles the training step, not --micro's kernels");

  const auto now = std::time(nullptr);
  json out = {{"command", "bench"},
              {"date", fmt::format("{:%Y-%m-%d %H:%M:%S}", fmt::localtime(now))},
              {"device", o.device.str()},
              {"machine", machine(o.device)},
              {"dtype", o.runtime.bf16 ? "bf16" : "fp32"},
              {"kernels", describe(o.runtime.kernels)},
              {"batch", o.batch},
              {"head_dim", o.head_dim},
              {"warmup", o.warmup},
              {"iters", o.iters},
              {"variants", o.variants}};
  spdlog::info("bench on {} ({}), {}, batch {}", o.device.str(), out["machine"].get<std::string>(),
               out["dtype"].get<std::string>(), o.batch);
  if (args.count("micro")) {
    out["micro"] = run_micro(str_list(args["micro"].as<std::string>()), o, out["machine"].get<std::string>());
  } else {
    // --no-block: no grid and no header for one; the JSON keeps its (empty) "block" list.
    out["block"] = args.count("no-block") ? json::array()
                                          : run_block_grid(o, table, widths, seq_lens, out["machine"].get<std::string>());
    if (!args.count("no-step")) out["step"] = run_train_step(o, table, step_ref, B, T);
    if (profile) out["profile"] = run_step_profile(o, step_ref, B, T, profile_steps);
  }
  if (args.count("json")) {
    const std::filesystem::path path = args["json"].as<std::string>();
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
    write_file_atomic(path, out.dump(2) + "\n");
    spdlog::info("wrote {}", path.string());
  }
  return 0;
}

}  // namespace xsagpt::cli
