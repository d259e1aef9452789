#include "train/state.h"

#include "train/from_checkpoint.h"

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

}  // namespace

TrainingState::TrainingState(const RunConfig& cfg, const Runtime& rt, torch::Device device, DistContext& dist)
    : loader(loader_options(cfg, device, dist, /*val=*/false)),
      val(loader_options(cfg, device, dist, /*val=*/true), cfg.train.eval_tokens),
      cfg_(cfg),
      device_(device),
      dist_(dist) {
  check_data(cfg.model.vocab_size);
  auto parts = build_training(cfg.model, cfg.train, rt, device, dist);  // as bench builds them
  model = parts.model;
  params = std::move(parts.params);
  sync = std::move(parts.sync);
  optimizer = std::move(parts.optimizer);
}

TrainingState::~TrainingState() = default;

void TrainingState::check_data(int64_t vocab_size) const {
  std::vector<const ShardInfo*> all;
  for (const auto& s : loader.shards()) all.push_back(&s);
  for (const auto& s : val.shards()) all.push_back(&s);
  // Shards are read from disk (or the page cache) in parallel; the first error in
  // file order is the one reported.
  const size_t workers = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8);
  std::vector<std::string> errors(all.size());
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (size_t w = 0; w < std::min(workers, all.size()); ++w)
    pool.emplace_back([&] {
      for (size_t i; (i = next++) < all.size();) {
        try {
          check_token_ids(*all[i], vocab_size);
        } catch (const std::exception& e) {
          errors[i] = e.what();
        }
      }
    });
  for (auto& th : pool) th.join();
  for (const auto& e : errors)
    if (!e.empty()) throw DataError(e + " (found before training: nothing was written or changed)");
}

void TrainingState::restore(const Checkpoint& c, const std::string& file) {
  TORCH_CHECK(!batches_, "TrainingState::restore: the batch thread has started");
  load_weights(model, c.model, file);
  model->parameters_changed();
  optimizer->load_state(c.optimizer, file);
  try {
    loader.load_state(LoaderState::from_json(c.loader[dist_.rank()]));
    val.check_identity(c.val_shards);
  } catch (const DataError& e) {
    throw DataError(fmt::format("{}: {}", file, e.what()));
  }
  if (c.rng_cpu.defined()) default_generator(torch::kCPU).set_state(c.rng_cpu);
  if (c.rng_cuda.defined() && device_.is_cuda()) default_generator(device_).set_state(c.rng_cuda);
  step = c.step;
  tokens = c.tokens;
  elapsed_before = c.elapsed_s;
  if (dist_.is_main()) spdlog::info("resumed from {} at step {}", file, step);
}

void TrainingState::start() { batches_ = std::make_unique<PrefetchingLoader>(loader); }

std::pair<torch::Tensor, torch::Tensor> TrainingState::next_batch() {
  auto [x, y] = batches_->next();
  return {x.to(device_, /*non_blocking=*/true), y.to(device_, /*non_blocking=*/true)};
}

void TrainingState::save(const std::filesystem::path& run_dir, int64_t keep, double elapsed_s, double train_loss,
                         double val_loss, const TrainWindow& window) {
  dist_.check_replicated(params, "parameters");  // a diverged replica must not be saved
  Checkpoint c;
  c.step = step;
  c.tokens = tokens;
  c.elapsed_s = elapsed_s;
  c.config = to_json(cfg_);
  for (const auto& item : model->named_parameters()) c.model[item.key()] = item.value();
  c.optimizer = optimizer->state();  // every rank takes part; complete on rank 0
  c.loader = dist_.all_gather((batches_ ? batches_->state() : loader.state()).to_json());
  c.val_shards = val.identity();
  c.rng_cpu = default_generator(torch::kCPU).get_state();
  if (device_.is_cuda()) c.rng_cuda = default_generator(device_).get_state();
  c.train_loss = train_loss;
  c.val_loss = val_loss;
  c.window = window;
  c.run_id = run_id;
  // The loss of a step is computed before its update: an update that made the
  // weights NaN or infinite shows only here, and such weights are never saved.
  if (const auto bad = first_non_finite(c.model, "model"))
    throw std::runtime_error(
        fmt::format("{} is not finite after step {}; not saved. {}", *bad, step, last_good_checkpoint(run_dir)));
  if (dist_.is_main()) {
    save_checkpoint(c, checkpoint_path(run_dir, step));
    prune_checkpoints(run_dir, keep);
  }
  dist_.barrier();
}

}  // namespace xsagpt
