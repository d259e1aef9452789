#include "train/trainer.h"

#include "data/loader.h"
#include "data/prefetch.h"
#include "model/counts.h"
#include "model/from_checkpoint.h"
#include "model/gpt.h"
#include "model/sdpa_backend.h"
#include "model/xsa_cuda.h"
#include "train/checkpoint.h"
#include "train/grad_clip.h"
#include "train/metrics.h"
#include "train/memory_check.h"
#include "train/mfu.h"
#include "train/optimizer.h"
#include "train/precision.h"
#include "train/run_dir.h"
#include "train/schedule.h"
#include "train/signals.h"
#include "train/zero.h"
#include "util/device.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>

namespace xsagpt {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  auto s = static_cast<int64_t>(seconds);
  if (s >= 3600) return fmt::format("{}h{:02d}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02d}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

std::string human_rate(double x) {
  if (x >= 1e6) return fmt::format("{:.2f}M", x / 1e6);
  if (x >= 1e3) return fmt::format("{:.1f}K", x / 1e3);
  return fmt::format("{:.0f}", x);
}

// The generator dropout and sampling draw from (a handle: copies share state).
at::Generator default_generator(const torch::Device& device) { return at::globalContext().defaultGenerator(device); }

}  // namespace

TrainResult train(const RunConfig& cfg, const TrainOptions& opts, DistContext& dist) {
  const auto& t = cfg.train;
  const fs::path dir = cfg.out_dir;
  const int64_t world = dist.world_size();
  cfg.validate(world);
  // Checks that need the machine, also before anything is created on disk.
  const auto device = resolve_device(t.device, "train.device", dist.local_rank());
  if (t.xsa_kernel == "fused" && !(device.is_cuda() && xsa_cuda_kernels_built()))
    throw ConfigError("train.xsa_kernel: \"fused\" needs a CUDA device and a CUDA build; this run is on " +
                      device.str() + (xsa_cuda_kernels_built() ? "" : " and the build has no CUDA kernels"));

  // ---- where to start: fresh, or from a checkpoint -------------------------
  auto start = plan_run_dir(dir, opts.resume, opts.overwrite);
  std::optional<Checkpoint> ckpt;
  if (start.checkpoint) {
    ckpt = load_checkpoint(*start.checkpoint);
    check_resume_compatible(cfg, ckpt->config, start.checkpoint->string());
    if (static_cast<int64_t>(ckpt->loader.size()) != world)
      throw ConfigError(fmt::format(
          "{}: saved by {} rank(s) but this run has world size {}; resume with the same number of processes",
          start.checkpoint->string(), ckpt->loader.size(), world));
    if (ckpt->step >= t.max_steps) {
      if (dist.is_main()) spdlog::info("{}: already finished at step {} (train.max_steps = {})", dir.string(), ckpt->step, t.max_steps);
      return TrainResult{ckpt->step, true, NAN, NAN};
    }
  }
  dist.barrier();  // every rank has read the run directory before rank 0 changes it
  if (dist.is_main()) prepare_run_dir(dir, cfg, start);
  dist.barrier();

  // ---- device, precision, model, optimizer, data ---------------------------
  setup_cpu_threads(t.threads);
  if (dist.is_main() && !device.is_cuda()) spdlog::info("cpu: {}", cpu_threads_description());
  const bool bf16 = t.precision == "bf16" || (t.precision == "auto" && device.is_cuda());
  if (device.is_cuda()) {
    at::globalContext().setAllowTF32CuBLAS(true);
    at::globalContext().setAllowTF32CuDNN(true);
  }
  torch::manual_seed(static_cast<uint64_t>(t.seed));  // same initial weights on every rank
  GPT model(cfg.model);
  model->set_memory_options(t.activation_checkpointing, t.loss_chunk);
  model->set_xsa_kernel(t.xsa_kernel);
  model->to(device);
  auto params = model->unique_named_parameters();
  std::vector<torch::Tensor> param_tensors;
  for (auto& [n, p] : params) param_tensors.push_back(p);
  dist.broadcast(param_tensors);
  auto grad_sync = dist.gradient_sync(param_tensors);  // averages gradients over ranks
  ShardedAdamW opt(params, AdamWConfig{t.beta1, t.beta2, t.eps, t.weight_decay, t.adamw}, dist, t.shard_optimizer);

  LoaderOptions lo;
  lo.pattern = cfg.data.train;
  lo.batch_size = t.micro_batch;
  lo.seq_len = t.seq_len;
  lo.rank = dist.rank();
  lo.world_size = world;
  lo.seed = static_cast<uint64_t>(t.seed);
  lo.shuffle = cfg.data.shuffle;
  lo.vocab_size = cfg.model.vocab_size;
  lo.pin_memory = device.is_cuda();
  DataLoader loader(lo);
  LoaderOptions vo = lo;
  vo.pattern = cfg.data.val;
  vo.shuffle = false;
  ValidationSet val(vo, t.eval_tokens);

  int64_t step = 0, tokens = 0;
  double elapsed_before = 0;
  if (ckpt) {
    load_weights(model, ckpt->model, start.checkpoint->string());
    opt.load_state(ckpt->optimizer);
    loader.load_state(LoaderState::from_json(ckpt->loader[dist.rank()]));
    if (ckpt->rng_cpu.defined()) default_generator(torch::kCPU).set_state(ckpt->rng_cpu);
    if (ckpt->rng_cuda.defined() && device.is_cuda()) default_generator(device).set_state(ckpt->rng_cuda);
    step = ckpt->step;
    tokens = ckpt->tokens;
    elapsed_before = ckpt->elapsed_s;
    if (dist.is_main()) spdlog::info("resumed from {} at step {}", start.checkpoint->string(), step);
    ckpt.reset();  // free the host copy of the weights
  }

  PrefetchingLoader batches(loader);  // from here on only `batches` touches the loader
  const int64_t accum = cfg.accumulation_steps(world);
  const int64_t step_tokens = cfg.tokens_per_micro_step(world) * accum;
  const auto counts = count_params(cfg.model);
  const double flops_per_step = flops_per_token(cfg.model, t.seq_len) * static_cast<double>(step_tokens);
  std::optional<double> peak;
  if (device.is_cuda()) peak = gpu_peak_flops(device_name(device), bf16);
  if (const auto gpu_bytes = device.is_cuda() ? device_memory(device) : std::nullopt; gpu_bytes && dist.is_main()) {
    const auto est = estimate_training_memory(cfg.model, t.micro_batch, t.seq_len,
                                              {bf16, t.activation_checkpointing, t.loss_chunk, t.shard_optimizer ? world : 1});
    if (const auto warning = memory_warning(cfg, est.total(), *gpu_bytes)) spdlog::warn("{}", *warning);
  }
  if (dist.is_main()) {
    const auto backend = sdpa_backend(cfg.model, device, bf16, cfg.model.dropout);
    if (device.is_cuda() && backend == "math")
      spdlog::warn("attention: ATen picks its math SDPA path (T x T weights in memory, slow) for head_dim {} in {}; "
                   "flash attention needs bf16/fp16 and head_dim <= 256",
                   cfg.model.head_dim, bf16 ? "bf16" : "fp32");
    else
      spdlog::info("attention: SDPA backend {}", backend);
    spdlog::info("model: {} layers, d_model {}, {}x{} heads, attention {}, {:.2f}M parameters ({:.2f}M non-embedding)",
                 cfg.model.n_layer, cfg.model.d_model, cfg.model.n_head, cfg.model.head_dim, cfg.model.attention,
                 counts.total / 1e6, counts.non_embedding / 1e6);
    spdlog::info("training: {} steps of {} tokens ({} x {} x {} accumulation x {} rank(s)), {} on {}, AdamW {}",
                 t.max_steps, step_tokens, t.micro_batch, t.seq_len, accum, world, bf16 ? "bf16 autocast" : "fp32",
                 device.str(), opt.impl());
    spdlog::info("optimizer: {}", opt.summary());
    spdlog::info("validation: {} batches ({} tokens); run dir {}", val.num_batches(),
                 val.num_batches() * t.micro_batch * t.seq_len * world, dir.string());
  }

  MetricsLog metrics = dist.is_main() ? MetricsLog(dir / "metrics.jsonl", start.checkpoint ? step : -1)
                                      : MetricsLog();
  install_stop_handlers();
  model->train();

  const auto run_start = Clock::now();
  auto elapsed = [&] { return elapsed_before + std::chrono::duration<double>(Clock::now() - run_start).count(); };

  // Non-finite loss or grad norm: recorded on the device without a sync, read at log/save points.
  auto bad_step = torch::full({}, -1, torch::TensorOptions().dtype(torch::kLong).device(device));
  auto check_finite = [&] {
    auto first_bad = bad_step.item<int64_t>();
    if (first_bad >= 0)
      throw std::runtime_error(fmt::format(
          "loss or gradient norm is not finite at step {}; stopping. The last good checkpoint in {} is kept.",
          first_bad + 1, (dir / "checkpoints").string()));
  };

  auto evaluate = [&]() -> double {
    torch::NoGradGuard no_grad;
    model->eval();
    auto sum = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(device));
    for (int64_t i = 0; i < val.num_batches(); ++i) {
      auto [x, y] = val.batch(i);
      AutocastGuard ac(device, bf16);
      sum += model->forward(x.to(device, true), y.to(device, true)).loss.to(torch::kFloat64);
    }
    model->train();
    return dist.mean(sum / static_cast<double>(std::max<int64_t>(1, val.num_batches()))).item<double>();
  };

  auto save = [&](int64_t at_step) {
    check_finite();
    dist.check_replicated(param_tensors, "parameters");  // a diverged replica must not be saved
    Checkpoint c;
    c.step = at_step;
    c.tokens = tokens;
    c.elapsed_s = elapsed();
    c.config = to_json(cfg);
    for (const auto& item : model->named_parameters()) c.model[item.key()] = item.value();
    c.optimizer = opt.state();  // every rank takes part; complete on rank 0
    c.loader = dist.all_gather(batches.state().to_json());
    c.rng_cpu = default_generator(torch::kCPU).get_state();
    if (device.is_cuda()) c.rng_cuda = default_generator(device).get_state();
    if (dist.is_main()) {
      save_checkpoint(c, checkpoint_path(dir, at_step));
      prune_checkpoints(dir, t.keep_checkpoints);
    }
    dist.barrier();
  };

  TrainResult result;
  auto loss_accum = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat32).device(device));
  torch::Tensor grad_norm;
  auto interval_start = Clock::now();
  int64_t interval_steps = 0;

  // A fresh run's val loss at initialisation anchors the curves (about ln(vocab)).
  if (step == 0 && t.eval_interval > 0) {
    const double vl = evaluate();
    if (dist.is_main()) {
      spdlog::info("step {:>6}/{} | val loss {:.4f}", 0, t.max_steps, vl);
      metrics.write({{"step", 0}, {"tokens", 0}, {"time_s", elapsed()}, {"val_loss", vl}});
    }
    interval_start = Clock::now();
  }

  while (step < t.max_steps) {
    const double lr = learning_rate(t, step);
    for (int64_t micro = 0; micro < accum; ++micro) {
      auto [x, y] = batches.next();
      x = x.to(device, /*non_blocking=*/true);
      y = y.to(device, /*non_blocking=*/true);
      torch::Tensor loss;
      {
        AutocastGuard ac(device, bf16);
        loss = model->forward(x, y).loss / static_cast<double>(accum);
      }
      grad_sync->backward(loss, /*last=*/micro + 1 == accum);
      loss_accum += loss.detach();
    }
    grad_norm = clip_grad_norm(param_tensors, t.grad_clip);
    bad_step = torch::where((bad_step < 0) & ~(torch::isfinite(loss_accum) & torch::isfinite(grad_norm)),
                            torch::full_like(bad_step, step), bad_step);
    opt.step(lr);
    grad_sync->zero_grad();
    ++step;
    ++interval_steps;
    tokens += step_tokens;
    const bool last = step == t.max_steps;

    if (step % t.log_interval == 0 || last) {
      check_finite();
      const double loss = dist.mean(loss_accum).item<double>() / static_cast<double>(interval_steps);
      const double norm = grad_norm.item<double>();
      const double dt = std::chrono::duration<double>(Clock::now() - interval_start).count();
      const double tok_s = static_cast<double>(interval_steps * step_tokens) / dt;
      std::optional<double> mfu;
      if (peak) mfu = flops_per_step * static_cast<double>(interval_steps) / dt / (*peak * world);
      result.final_train_loss = loss;
      if (dist.is_main()) {
        const double eta = dt / static_cast<double>(interval_steps) * static_cast<double>(t.max_steps - step);
        spdlog::info("step {:>6}/{} | loss {:.4f} | lr {:.2e} | norm {:.3f} | {} tok/s | MFU {} | ETA {}", step,
                     t.max_steps, loss, lr, norm, human_rate(tok_s), mfu ? fmt::format("{:.1f}%", *mfu * 100) : "n/a",
                     format_duration(eta));
        metrics.write({{"step", step}, {"tokens", tokens}, {"time_s", elapsed()}, {"train_loss", loss}, {"lr", lr},
                       {"grad_norm", norm}, {"tokens_per_s", tok_s}, {"mfu", mfu ? json(*mfu) : json(nullptr)}});
      }
      loss_accum.zero_();
      interval_steps = 0;
      interval_start = Clock::now();
    }
    if ((t.eval_interval > 0 && step % t.eval_interval == 0) || last) {
      const double vl = evaluate();
      result.final_val_loss = vl;
      if (dist.is_main()) {
        spdlog::info("step {:>6}/{} | val loss {:.4f}", step, t.max_steps, vl);
        metrics.write({{"step", step}, {"tokens", tokens}, {"time_s", elapsed()}, {"val_loss", vl}});
      }
      interval_start = Clock::now();  // evaluation time is not training throughput
    }
    const bool stop = dist.any(stop_requested());
    if ((t.ckpt_interval > 0 && step % t.ckpt_interval == 0) || last || stop) {
      save(step);
      if (dist.is_main()) spdlog::info("saved {}", checkpoint_path(dir, step).string());
      interval_start = Clock::now();
    }
    if (stop && !last) {
      if (dist.is_main())
        spdlog::warn("stopped by {} after step {}; resume with --resume auto",
                     stop_signal() ? fmt::format("signal {}", stop_signal()) : "a signal to another rank", step);
      result.step = step;
      return result;
    }
  }

  result.step = step;
  result.finished = true;
  if (dist.is_main())
    write_done_file(dir, {{"step", step}, {"tokens", tokens}, {"final_train_loss", result.final_train_loss},
                          {"final_val_loss", result.final_val_loss}, {"wall_s", elapsed()}});
  return result;
}

}  // namespace xsagpt
