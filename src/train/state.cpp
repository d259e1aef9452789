#include "train/state.h"

#include "config/resume_check.h"
#include "data/vocab.h"
#include "run/from_checkpoint.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <thread>

namespace xsagpt {

namespace {

LoaderOptions loader_options(const RunConfig& cfg, torch::Device device, DistContext& dist, bool val) {
  LoaderOptions o;
  o.pattern = val ? cfg.data.val : cfg.data.train;
  o.batch_size = cfg.train.micro_batch;
  o.seq_len = cfg.train.seq_len;
  o.rank = dist.rank();
  o.world_size = dist.world_size();
  o.seed = static_cast<uint64_t>(cfg.train.seed);
  o.shuffle = !val && cfg.data.shuffle;
  o.vocab_size = cfg.model.vocab_size;
  o.pin_memory = device.is_cuda();
  return o;
}

// The generator dropout and sampling draw from (a handle: copies share state).
at::Generator default_generator(const torch::Device& device) { return at::globalContext().defaultGenerator(device); }

// The RNG part: the CPU generator's state, and the device's on CUDA.
RngState rng_state(const torch::Device& device) {
  RngState r;
  r.cpu = default_generator(torch::kCPU).get_state();
  if (device.is_cuda()) r.cuda = default_generator(device).get_state();
  return r;
}

void load_rng_state(const RngState& r, const torch::Device& device) {
  if (r.cpu.defined()) default_generator(torch::kCPU).set_state(r.cpu);
  if (r.cuda.defined() && device.is_cuda()) default_generator(device).set_state(r.cuda);
}

// The model part: its parameters by name.
ModelWeights model_state(const GPT& model) {
  ModelWeights w;
  for (const auto& item : model->named_parameters()) w[item.key()] = item.value();
  return w;
}

void load_model_state(GPT& model, const ModelWeights& w, const std::string& file) {
  load_weights(model, w, file);
  model->parameters_changed();
}

}  // namespace

// A resume may compute with other kernels than the run so far (another device, another
// train.kernels, or an "auto" that now resolves to more kernels): allowed, since the
// function is the same up to floating-point order (losses agree to about 1e-4), and said.
void TrainingState::check_kernels(const Checkpoint& c, const std::string& file) const {
  if (!dist_.is_main()) return;
  const auto now = describe(parts.model->runtime().kernels);
  if (c.kernels.empty())
    spdlog::warn("kernels: {} does not record which kernels its run computed with (an older version); this run "
                 "computes with {}",
                 file, now);
  else if (c.kernels != now)
    spdlog::warn("kernels: the checkpoint's run computed with {}, this run computes with {} (train.kernels \"{}\" "
                 "on {}): the same function in another floating-point order",
                 c.kernels, now, cfg_.train.kernels, device_.str());
}

TrainingState::TrainingState(const RunConfig& cfg, const Runtime& rt, torch::Device device, DistContext& dist)
    : loader(loader_options(cfg, device, dist, /*val=*/false)),
      val(loader_options(cfg, device, dist, /*val=*/true), cfg.train.eval_tokens),
      progress(cfg, rt, dist, device),
      cfg_(cfg),
      device_(device),
      dist_(dist),
      trace_(dist.rank()) {
  vocab_ = check_data(cfg.model.vocab_size);
  parts = build_training(cfg.model, cfg.train, rt, device, dist);  // as bench builds them
}

TrainingState::~TrainingState() = default;

ShardVocab TrainingState::check_data(int64_t vocab_size) const {
  std::vector<const ShardInfo*> all;
  for (const auto& s : loader.shards()) all.push_back(&s);
  for (const auto& s : val.shards()) all.push_back(&s);
  try {
    return check_shards_for_model(all, nullptr, vocab_size, "model.vocab_size");  // a fresh model takes theirs
  } catch (const DataError& e) {
    throw DataError(fmt::format("{} (found before training: nothing was written or changed)", e.what()));
  }
}

DataState TrainingState::data_state() {
  return {dist_.all_gather((batches_ ? batches_->state() : loader.state()).to_json()), val.identity(),
          val.num_sequences()};
}

void TrainingState::load_data_state(const DataState& d, const std::string& file) {
  try {
    // Every rank saved the stream's position, where the next optimizer step begins,
    // so any number of ranks continues from it.
    for (size_t r = 1; r < d.loader.size(); ++r)
      if (d.loader[r] != d.loader[0])
        throw DataError(fmt::format("the loader states of ranks 0 and {} differ; every rank saves the same", r));
    loader.load_state(LoaderState::from_json(d.loader[0]));
    val.check_identity(d.val_shards);
  } catch (const DataError& e) {
    throw DataError(fmt::format("{}: {}", file, e.what()));
  }
  if (d.val_sequences >= 0 && d.val_sequences != val.num_sequences() && dist_.is_main())
    spdlog::warn(
        "validation: {}'s run evaluated {} sequences, this one evaluates {} (train.eval_tokens {} in batches of "
        "micro_batch {} x {} rank(s)): the val losses from here on are over another set. An eval_tokens that is a "
        "multiple of both runs' micro_batch x seq_len x ranks keeps it",
        file, d.val_sequences, val.num_sequences(), cfg_.train.eval_tokens, cfg_.train.micro_batch, dist_.world_size());
}

void TrainingState::restore(const Checkpoint& c, const std::string& file) {
  TORCH_CHECK(!batches_, "TrainingState::restore: the batch thread has started");
  // The model learned the ids of the vocabulary its checkpoint records; data.* may change on a
  // resume, but not into another vocabulary.
  check_model_input(recorded_vocab(c.vocab, file + ": vocab"), cfg_.model.vocab_size, file, vocab_,
                    vocab_.compact() ? vocab_.file : "the shards (data.train, data.val)");
  load_model_state(parts.model, c.model, file);
  check_kernels(c, file);
  parts.optimizer->load_state(c.optimizer, file);
  load_data_state(c.data, file);
  load_rng_state(c.rng, device_);
  progress.load_state(c.progress);
  step = c.step;
  tokens = c.tokens;
  if (dist_.is_main()) spdlog::info("resumed from {} at step {}", file, step);
  if (const int64_t then = c.data.ranks(), now = dist_.world_size(); then != now) {
    const auto why = check_resume_ranks(cfg_, c.config, then, now, file);
    if (dist_.is_main()) spdlog::warn("{}", why);
    progress.add_rank_change({step, then, now});
  }
}

void TrainingState::start(const std::filesystem::path& metrics_path) {
  batches_ = std::make_unique<PrefetchingLoader>(loader);
  progress.start(metrics_path);
}

std::pair<torch::Tensor, torch::Tensor> TrainingState::next_batch() {
  auto [x, y] = batches_->next();
  trace_.record(step + 1, x, y);  // the step this micro-batch is part of
  return {x.to(device_, /*non_blocking=*/true), y.to(device_, /*non_blocking=*/true)};
}

void TrainingState::save(const std::filesystem::path& run_dir, int64_t keep) {
  progress.check_finite();                             // checkpoints only from finite states
  dist_.check_replicated(parts.params, "parameters");  // a diverged replica must not be saved
  Checkpoint c;
  c.step = step;
  c.tokens = tokens;
  c.config = to_json(cfg_);
  c.model = model_state(parts.model);
  c.optimizer = parts.optimizer->state();  // every rank takes part; complete on rank 0
  c.data = data_state();
  c.rng = rng_state(device_);
  c.progress = progress.state();
  c.kernels = describe(parts.model->runtime().kernels);
  c.vocab = vocab_to_json(vocab_);
  // The loss of a step is computed before its update: an update that made the
  // weights NaN or infinite shows only here, and such weights are never saved.
  if (const auto bad = first_non_finite(c.model, "model"))
    throw std::runtime_error(
        fmt::format("{} is not finite after step {}; not saved. {}", *bad, step, last_good_checkpoint(run_dir)));
  if (dist_.is_main()) {
    save_checkpoint(c, checkpoint_path(run_dir, step));
    prune_checkpoints(run_dir, keep, cfg_.train.ckpt_steps);
  }
  dist_.barrier();
}

}  // namespace xsagpt
