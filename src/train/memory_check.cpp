#include "train/memory_check.h"

#include <fmt/format.h>

namespace xsagpt {

MemoryCheck check_memory(const RunConfig& cfg, const Runtime& rt, int64_t world, bool cuda,
                         std::optional<double> device_bytes, const std::string& device) {
  const auto& t = cfg.train;
  MemoryCheck m;
  m.estimate =
      estimate_training_memory(cfg.model, t.micro_batch, t.seq_len,
                               MemoryOptions{rt, t.shard_optimizer ? world : 1, t.optimizer == Optimizer::kMuon, cuda});
  if (!device_bytes) return m;
  const auto& e = m.estimate;
  m.refusal = memory_refusal(cfg, e.state(), *device_bytes, device, e.rope_tables_bytes);
  m.warning = memory_warning(cfg, e.total(), *device_bytes);
  return m;
}

std::optional<std::string> memory_warning(const RunConfig& cfg, double estimate_bytes, double device_bytes) {
  if (estimate_bytes <= 0.95 * device_bytes) return std::nullopt;
  const auto& t = cfg.train;
  std::string advice;
  if (t.activation_checkpointing != Recompute::kBlock)
    advice += fmt::format(" train.activation_checkpointing=\"{}\",",
                          t.activation_checkpointing == Recompute::kNone ? "mlp\" or \"block" : "block");
  if (t.loss_chunk == 0) advice += " train.loss_chunk=4096,";
  advice += " a smaller train.micro_batch (train.batch_tokens stays, accumulation grows)";
  if (!t.shard_optimizer && shardable(t.optimizer)) advice += ", or with several GPUs train.shard_optimizer=true";
  constexpr double GiB = 1024.0 * 1024 * 1024;
  return fmt::format(
      "estimated training memory {:.1f} GiB (weights, grads, AdamW state and activations of a {} x {} micro-batch; "
      "`xsagpt info` shows the parts) exceeds this GPU's {:.1f} GiB; if it runs out of memory, try{}",
      estimate_bytes / GiB, t.micro_batch, t.seq_len, device_bytes / GiB, advice);
}

std::optional<std::string> memory_refusal(const RunConfig& cfg, double state_bytes, double device_bytes,
                                          const std::string& device, double rope_tables_bytes) {
  if (state_bytes <= device_bytes) return std::nullopt;
  constexpr double GiB = 1024.0 * 1024 * 1024;
  const auto& m = cfg.model;
  if (rope_tables_bytes >= state_bytes - rope_tables_bytes)  // the tables are most of it: block_size is the key
    return fmt::format(
        "model.block_size: {} positions (plus model.n_sink {}) give RoPE tables of {:.1f} GiB (cos and sin, "
        "4 bytes x head_dim {} per position), {:.1f} GiB with the weights, gradients and optimizer state: more "
        "than the {:.1f} GiB of {}; this run cannot fit: set model.block_size to the longest sequence the model "
        "should take (train.seq_len is {})",
        m.block_size, m.n_sink, rope_tables_bytes / GiB, m.head_dim, state_bytes / GiB, device_bytes / GiB, device,
        cfg.train.seq_len);
  return fmt::format(
      "model: its weights, gradients and AdamW state alone take {:.1f} GiB (`xsagpt info` shows the parts), more "
      "than the {:.1f} GiB of {}: this run cannot fit; use a smaller model (model.d_model, model.n_layer, "
      "model.vocab_size){}",
      state_bytes / GiB, device_bytes / GiB, device,
      cfg.train.shard_optimizer || !shardable(cfg.train.optimizer)
          ? ""
          : " or, with several GPUs, train.shard_optimizer=true");
}

}  // namespace xsagpt
