#include "train/trainer.h"

#include "model/counts.h"
#include "model/sdpa_backend.h"
#include "train/evaluate.h"
#include "train/memory_check.h"
#include "train/mfu.h"
#include "train/progress.h"
#include "train/run_dir.h"
#include "train/schedule.h"
#include "train/signals.h"
#include "train/state.h"
#include "train/step.h"
#include "util/device.h"
#include "util/test_stop.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace xsagpt {

namespace {

// The start-up block of the log: what runs where, and whether it will fit.
void announce(const RunConfig& cfg, const Runtime& rt, torch::Device device, const TrainingState& s,
              const MemoryEstimate& est, int64_t step_tokens, DistContext& dist) {
  const auto& t = cfg.train;
  const int64_t world = dist.world_size();
  if (const auto gpu_bytes = device.is_cuda() ? device_memory(device) : std::nullopt)
    if (const auto warning = memory_warning(cfg, est.total(), *gpu_bytes)) spdlog::warn("{}", *warning);
  const auto backend = sdpa_backend(cfg.model, device, rt.bf16, cfg.model.dropout);
  if (device.is_cuda() && backend == "math")
    spdlog::warn(
        "attention: ATen picks its math SDPA path (T x T weights in memory, slow) for head_dim {} in {}; "
        "flash attention needs bf16/fp16 and head_dim <= 256",
        cfg.model.head_dim, rt.bf16 ? "bf16" : "fp32");
  else
    spdlog::info("attention: SDPA backend {}", backend);
  const auto counts = count_params(cfg.model);
  spdlog::info("model: {} layers, d_model {}, {}x{} heads, attention {}, {:.2f}M parameters ({:.2f}M non-embedding)",
               cfg.model.n_layer, cfg.model.d_model, cfg.model.n_head, cfg.model.head_dim,
               cfg.model.describe_attention(), counts.total / 1e6, counts.non_embedding / 1e6);
  spdlog::info("training: {} steps of {} tokens ({} x {} x {} accumulation x {} rank(s)), {} on {}, AdamW {}",
               t.max_steps, step_tokens, t.micro_batch, t.seq_len, cfg.accumulation_steps(world), world,
               !rt.bf16        ? "fp32"
               : rt.autocast() ? "bf16 autocast"
                               : "bf16 (weights copied once per step)",
               device.str(), s.optimizer->impl());
  spdlog::info("kernels: {}{}", describe(rt.kernels),
               rt.kernels == Kernels{} || device.is_cuda() ? "" : " (their ATen twins: this run is not on CUDA)");
  spdlog::info("optimizer: {}", s.optimizer->summary());
  if (!device.is_cuda()) spdlog::info("cpu: {}", cpu_threads_description());
  spdlog::info("validation: {} batches ({} tokens); run dir {}", s.val.num_batches(), s.val.num_sequences() * t.seq_len,
               cfg.out_dir);
}

}  // namespace

TrainResult train(const RunConfig& cfg, const TrainOptions& opts, DistContext& dist) {
  const auto& t = cfg.train;
  const std::filesystem::path dir = cfg.out_dir;
  const int64_t world = dist.world_size();
  cfg.validate(world);
  const auto device = resolve_device(t.device, "train.device", dist.local_rank());
  const Runtime rt = cfg.runtime(device.is_cuda());

  // Where to start: fresh, from a checkpoint, or a run already finished. Nothing is
  // written to the run directory until the model, the data and the checkpoint's
  // state have all been set up without error (train/run_dir.h).
  // One trainer per run directory (train/run_dir.h): locked before it is read, so no
  // second trainer decides from a state the first is changing. A directory that does
  // not exist yet is claimed when it is made, after every check.
  RunDirLock lock;
  const bool existed = dist.any(dist.is_main() && std::filesystem::is_directory(dir));  // rank 0 decides
  auto take_lock = [&](auto&& lock_fn) {  // on rank 0; every rank learns whether it failed
    std::string error;
    bool busy = false;
    if (dist.is_main()) {
      try {
        lock = lock_fn(dir);
      } catch (const DirBusy& e) {
        error = e.what();
        busy = true;
      } catch (const std::exception& e) {  // e.g. a directory this user cannot write
        error = e.what();
      }
    }
    if (!dist.any(!error.empty())) return;
    const bool any_busy = dist.any(busy);  // the same exception on every rank: a sweep goes on alike
    if (error.empty()) error = fmt::format("out_dir {}: cannot be locked (see rank 0)", cfg.out_dir);
    if (any_busy) throw DirBusy(error);
    throw ConfigError(error);
  };
  if (existed) take_lock(lock_run_dir);
  if (dist.is_main() && lock.held()) recover_staged_run(dir);  // a session killed before its commit
  dist.barrier();
  auto run = open_run(cfg, opts.resume, opts.overwrite, world);
  if (run.finished) {
    if (dist.is_main()) close_finished_run(cfg, run);
    return TrainResult{run.finished->step, true, run.finished->final_train_loss, run.finished->final_val_loss};
  }
  setup_cpu_threads(t.threads);
  const auto est = estimate_training_memory(cfg.model, t.micro_batch, t.seq_len,
                                            MemoryOptions{rt, t.shard_optimizer ? world : 1, t.optimizer == "muon"});
  if (const auto bytes = device_memory(device)) {  // before the model is built: it might not fit at all
    const double state = est.params_bytes + est.grads_bytes + est.optimizer_bytes + est.weight_copies_bytes;
    if (const auto refusal = memory_refusal(cfg, state, *bytes, device.is_cuda() ? "this GPU" : "this machine's RAM"))
      throw ConfigError(*refusal);
  }
  TrainingState s(cfg, rt, device, dist);  // model, AdamW and data, the same on every rank
  s.run_id = run.start.run_id;
  if (run.checkpoint) s.restore(*run.checkpoint, run.start.checkpoint->string());
  TrainResult result;
  TrainWindow window;  // the steps since the checkpoint's last train-loss line
  if (run.checkpoint) {
    result.final_train_loss = run.checkpoint->train_loss;
    result.final_val_loss = run.checkpoint->val_loss;
    window = run.checkpoint->window;
  }
  run.checkpoint.reset();  // free the host copy of the weights
  dist.barrier();          // every rank has read the run directory and passed every check
  std::filesystem::path metrics_path;
  stop_here_for_tests("train:before-creating-out-dir");
  if (!existed) take_lock(lock_new_run_dir);
  if (dist.is_main()) metrics_path = prepare_run_dir(dir, cfg, run.start);
  // However this session ends, what it staged is committed if a checkpoint of it
  // landed, else removed: a failed resume leaves the run exactly as it was.
  struct StagedCleanup {
    std::filesystem::path dir;
    bool main;
    ~StagedCleanup() {
      if (!main) return;
      try {
        recover_staged_run(dir);
      } catch (const std::exception& e) {
        spdlog::warn("{}: {}", dir.string(), e.what());
      }
    }
  } staged_cleanup{dir, dist.is_main()};
  dist.barrier();

  const int64_t accum = cfg.accumulation_steps(world);
  const int64_t step_tokens = cfg.tokens_per_micro_step(world) * accum;
  if (dist.is_main()) announce(cfg, rt, device, s, est, step_tokens, dist);
  TrainStep train_step(s.model, *s.optimizer, *s.sync, s.params, accum, t.grad_clip);
  Progress progress(cfg, dist, device, step_tokens, flops_per_token(cfg.model, t.seq_len) * double(step_tokens),
                    device.is_cuda() ? gpu_peak_flops(device_name(device), rt.bf16) : std::nullopt, s.elapsed_before,
                    metrics_path);
  progress.restore_window(window);
  auto save = [&] {
    progress.check_finite();  // checkpoints only from finite states
    s.save(dir, t.keep_checkpoints, progress.elapsed(), result.final_train_loss, result.final_val_loss,
           progress.window());
    if (dist.is_main()) {
      commit_staged_run(dir);  // a resumed run replaces the finished one only from here on
      spdlog::info("saved {}", checkpoint_path(dir, s.step).string());
    }
    progress.pause();
  };
  s.start();
  install_stop_handlers();

  // A fresh run's val loss at initialisation anchors the curves (ln(vocab)).
  if (s.step == 0 && t.eval_interval > 0) progress.log_val(0, 0, evaluate(s.model, s.val, device, dist));
  while (s.step < t.max_steps) {
    const double lr = learning_rate(t, s.step);
    const auto stats = train_step([&] { return s.next_batch(); }, lr);  // forward, backward, clip, AdamW
    s.step += 1;
    s.tokens += step_tokens;
    progress.record(s.step, stats);
    const bool last = s.step == t.max_steps;

    if (s.step % t.log_interval == 0 || last) result.final_train_loss = progress.log_train(s.step, s.tokens, lr);
    if ((t.eval_interval > 0 && s.step % t.eval_interval == 0) || last) {
      result.final_val_loss = evaluate(s.model, s.val, device, dist);
      progress.log_val(s.step, s.tokens, result.final_val_loss);
    }
    const bool stop = dist.any(stop_requested());  // SIGINT/SIGTERM on any rank
    if ((t.ckpt_interval > 0 && s.step % t.ckpt_interval == 0) || last || stop) save();
    if (stop && !last) {
      if (dist.is_main())
        spdlog::warn("stopped by {} after step {}; resume with --resume auto",
                     stop_signal() ? fmt::format("signal {}", stop_signal()) : "a signal to another rank", s.step);
      result.step = s.step;
      return result;
    }
  }
  result.step = s.step;
  result.finished = true;
  if (dist.is_main())
    finish_run(dir, {s.step, s.tokens, result.final_train_loss, result.final_val_loss, progress.elapsed()});
  return result;
}

}  // namespace xsagpt
