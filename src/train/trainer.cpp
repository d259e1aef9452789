#include "train/trainer.h"

#include "model/counts.h"
#include "model/mup.h"
#include "model/sdpa_backend.h"
#include "optim/schedule.h"
#include "run/run_dir.h"
#include "train/eval_diagnostics.h"
#include "train/evaluate.h"
#include "train/memory_check.h"
#include "train/run_check.h"
#include "train/signals.h"
#include "train/state.h"
#include "train/step.h"
#include "util/device.h"
#include "util/test_stop.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace xsagpt {

namespace {

// The start-up block of the log (rank 0's): what runs where, and whether it will fit.
void announce(const RunConfig& cfg, const Runtime& rt, torch::Device device, const TrainingState& s,
              const MemoryCheck& memory, int64_t step_tokens, DistContext& dist) {
  if (!dist.is_main()) return;
  const auto& t = cfg.train;
  const int64_t world = dist.world_size();
  if (device.is_cuda() && memory.warning) spdlog::warn("{}", *memory.warning);
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
               cfg.model.n_layer, cfg.model.d_model, cfg.model.n_head, cfg.model.head_dim, cfg.model.spec().describe(),
               counts.total / 1e6, counts.non_embedding / 1e6);
  if (cfg.model.mup()) spdlog::info("parametrization: {}", describe_parametrization(cfg.model));
  spdlog::info("training: {} steps of {} tokens ({} x {} x {} accumulation x {} rank(s)), {} on {}, AdamW {}",
               t.max_steps, step_tokens, t.micro_batch, t.seq_len, cfg.accumulation_steps(world), world,
               !rt.bf16        ? "fp32"
               : rt.autocast() ? "bf16 autocast"
                               : "bf16 (weights copied once per step)",
               device.str(), s.parts.optimizer->impl());
  spdlog::info("kernels: {}{}", describe(rt.kernels),
               rt.kernels == Kernels{} || device.is_cuda() ? "" : " (their ATen twins: this run is not on CUDA)");
  // A kind whose row names no fused kernel for its step still trains under "fused" or
  // "auto": its step runs as ATen ops beside the other kernels, and the log says so
  // (docs/kernels.md).
  if (const auto& kind = cfg.model.spec().kind(); kind.step && !*kind.kernel && !(rt.kernels == Kernels{}))
    spdlog::info("kernels: attention \"{}\" has no fused kernel: its step runs as ATen ops", kind.name);
  spdlog::info("optimizer: {}", s.parts.optimizer->summary());
  if (!device.is_cuda()) spdlog::info("cpu: {}", cpu_threads_description());
  spdlog::info("validation: {} batches ({} tokens); run dir {}", s.val.num_batches(), s.val.num_sequences() * t.seq_len,
               cfg.out_dir);
}

}  // namespace

TrainResult train(const RunConfig& cfg, const TrainOptions& opts, DistContext& dist) {
  const auto& t = cfg.train;
  const int64_t world = dist.world_size();
  cfg.validate(world);
  const auto device = resolve_device(t.device, "train.device", dist.local_rank());
  const Runtime rt = cfg.runtime(device.is_cuda());
  check_runnable(cfg, rt, device);  // before anything is written; info asks the same

  // Where to start: fresh, from a checkpoint, or a run already finished (run/run_dir.h).
  // Nothing is written to the run directory until the model, the data and the
  // checkpoint's state have all been set up without error.
  RunDir run(cfg, opts.resume, opts.overwrite, dist, opts.same_config, opts.branch_from);
  // Another process may take the run over while this one is stopped (a sweep point's lock):
  // asked before each write, every rank learning rank 0's answer; once lost, nothing more
  // is written, and what this session staged is left as a killed session's would be.
  auto lost = [&] {
    if (!opts.still_held || !dist.any(!opts.still_held())) return false;
    run.abandon();
    return true;
  };
  if (lost()) return TrainResult{.lost = true};
  if (const auto done = run.close_if_finished())
    return TrainResult{done->step, true, done->final_train_loss, done->final_val_loss};
  setup_cpu_threads(t.threads, "train.threads");
  // Before the model is built: it might not fit at all.
  const auto memory = check_memory(cfg, rt, world, device.is_cuda(), device_memory(device),
                                   device.is_cuda() ? "this GPU" : "this machine's RAM");
  if (memory.refusal) throw ConfigError(*memory.refusal);
  TrainingState s(cfg, rt, device, dist);  // model, optimizer, data, progress: the same on every rank
  s.progress.set_run_id(run.restore([&](const Checkpoint& c, const std::string& file) { s.restore(c, file); }));
  if (lost()) return TrainResult{.lost = true};
  const auto metrics_file = run.begin();  // every check passed: the directory is written from here on

  const int64_t accum = cfg.accumulation_steps(world);
  const int64_t step_tokens = cfg.tokens_per_step(world);
  announce(cfg, rt, device, s, memory, step_tokens, dist);
  TrainStep train_step(s.parts.model, *s.parts.optimizer, *s.parts.sync, s.parts.params, accum, t.grad_clip);
  Progress& progress = s.progress;
  auto save = [&] {
    if (lost()) return false;
    s.save(cfg.out_dir, t.keep_checkpoints);
    run.commit(s.step);
    progress.pause();
    return true;
  };
  const auto lost_at = [&] { return TrainResult{s.step, false, progress.train_loss(), progress.val_loss(), true}; };
  s.start(metrics_file);
  install_stop_handlers();

  // A fresh run's val loss at initialisation anchors the curves (ln(vocab)).
  // Each val line also carries the similarity bias and the XSA gates (train/eval_diagnostics.h).
  // False, writing nothing, where the run was lost during the evaluation.
  auto log_val = [&] {
    const double loss = evaluate(s.parts.model, s.val, device, dist);
    const auto diagnostics = eval_diagnostics(s.parts.model, s.val, t, device, dist);
    if (lost()) return false;
    progress.log_val(s.step, s.tokens, loss, diagnostics);
    return true;
  };
  if (s.step == 0 && t.eval_interval > 0 && !log_val()) return lost_at();
  while (s.step < t.max_steps) {
    const double lr = learning_rate(t, s.step);
    const auto stats = train_step([&] { return s.next_batch(); }, lr);  // forward, backward, clip, optimizer
    s.step += 1;
    s.tokens += step_tokens;
    progress.record(s.step, stats);
    const bool last = s.step == t.max_steps;
    if (lost()) return lost_at();  // before this step's lines

    if (s.step % t.log_interval == 0 || last) progress.log_train(s.step, s.tokens, lr);
    if (((t.eval_interval > 0 && s.step % t.eval_interval == 0) || last) && !log_val()) return lost_at();
    const bool stop = dist.any(stop_requested());  // SIGINT/SIGTERM on any rank
    const bool branch_point = std::find(t.ckpt_steps.begin(), t.ckpt_steps.end(), s.step) != t.ckpt_steps.end();
    if ((t.ckpt_interval > 0 && s.step % t.ckpt_interval == 0) || branch_point || last || stop) {
      if (!save()) return lost_at();
      // A test can hold a run just after a given checkpoint (util/test_stop.h), to
      // interrupt, requeue or signal it there; a resumed run passes that step.
      if (!last) stop_here_for_tests(("train:checkpoint-saved-" + std::to_string(s.step)).c_str());
    }
    if (stop && !last) {
      progress.log_stop(s.step, stop_signal());
      return TrainResult{s.step, false, progress.train_loss(), progress.val_loss()};
    }
  }
  if (lost()) return lost_at();
  run.finish(
      {s.step, s.tokens, progress.train_loss(), progress.val_loss(), progress.elapsed(), progress.rank_changes()});
  return TrainResult{s.step, true, progress.train_loss(), progress.val_loss()};
}

}  // namespace xsagpt
