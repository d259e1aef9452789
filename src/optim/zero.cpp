#include "optim/zero.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>
#include <set>

namespace xsagpt {

std::vector<int64_t> partition_by_size(const std::vector<int64_t>& bytes, int64_t world_size) {
  TORCH_CHECK(world_size >= 1, "partition_by_size: world size ", world_size);
  std::vector<size_t> order(bytes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return bytes[a] > bytes[b]; });
  std::vector<int64_t> load(static_cast<size_t>(world_size), 0), owner(bytes.size());
  for (size_t i : order) {
    const auto r = std::min_element(load.begin(), load.end()) - load.begin();  // first of the least loaded
    owner[i] = r;
    load[static_cast<size_t>(r)] += bytes[i];
  }
  return owner;
}

namespace {

int64_t moment_bytes(const torch::Tensor& p) { return 2 * static_cast<int64_t>(p.nbytes()); }  // exp_avg, exp_avg_sq

std::string human_bytes(int64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double x = static_cast<double>(bytes);
  int u = 0;
  while (x >= 1024 && u < 4) {
    x /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.2f} {}", x, units[u]);
}

}  // namespace

ShardedAdamW::ShardedAdamW(std::vector<std::pair<std::string, torch::Tensor>> named_params, const AdamWConfig& cfg,
                           DistContext& dist, bool shard)
    : dist_(dist),
      cfg_(cfg),
      params_(std::move(named_params)),
      sharded_(shard && dist.world_size() > 1),
      asked_(shard) {
  for (const auto& [n, p] : params_) tensors_.push_back(p);
  std::vector<std::pair<std::string, torch::Tensor>> mine = params_;
  if (sharded_) {
    std::vector<int64_t> bytes;
    for (const auto& p : tensors_) bytes.push_back(static_cast<int64_t>(p.nbytes()));
    owner_ = partition_by_size(bytes, dist.world_size());
    mine.clear();
    for (size_t i = 0; i < params_.size(); ++i)
      if (owner_[i] == dist.rank()) mine.push_back(params_[i]);
  }
  int64_t held = 0;
  for (const auto& [n, p] : mine) held += moment_bytes(p);
  if (!mine.empty()) local_ = std::make_unique<AdamW>(std::move(mine), cfg);
  impl_ = local_ ? local_->impl() : "(no parameters on this rank)";
  if (sharded_) {
    for (const auto& j : dist.all_gather(held)) state_bytes_.push_back(j.get<int64_t>());
  } else {
    state_bytes_.assign(static_cast<size_t>(dist.world_size()), held);
  }
}

ShardedAdamW::~ShardedAdamW() = default;

void ShardedAdamW::step(double lr, const torch::Tensor& clip) {
  if (local_) local_->step(lr, clip);
  if (sharded_) dist_.broadcast_from_owners(tensors_, owner_);
}

AdamWState ShardedAdamW::state() {
  AdamWState local = local_ ? local_->state() : AdamWState{};
  if (!sharded_) return local;
  // Which parameters have state yet (torch::optim::AdamW creates it at their first step).
  nlohmann::json names = nlohmann::json::array();
  for (const auto& [name, t] : local.exp_avg) names.push_back(name);
  std::vector<std::set<std::string>> has;
  for (const auto& j : dist_.all_gather(names)) has.emplace_back(j.begin(), j.end());

  AdamWState full;
  const int64_t rank = dist_.rank();
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& [name, p] = params_[i];
    const int64_t owner = owner_[i];
    if (!has[static_cast<size_t>(owner)].count(name) || (rank != 0 && rank != owner)) continue;
    if (owner == rank) {
      if (rank == 0) {  // live tensors, as an unsharded run saves them
        full.exp_avg[name] = local.exp_avg[name];
        full.exp_avg_sq[name] = local.exp_avg_sq[name];
        full.step[name] = local.step[name];
        continue;
      }
      // The step count travels as float32 on the parameter's device, where both sides can place it.
      for (auto t : {local.exp_avg[name], local.exp_avg_sq[name], local.step[name].to(p.device(), torch::kFloat32)})
        dist_.send_to_main(t, owner);
      continue;
    }
    // Rank 0 receives one tensor at a time and keeps it in host memory: the
    // device never holds more than one other rank's tensor.
    auto receive = [&](torch::Tensor buf) {
      dist_.send_to_main(buf, owner);
      return buf.cpu();
    };
    full.exp_avg[name] = receive(torch::empty_like(p, torch::MemoryFormat::Contiguous));
    full.exp_avg_sq[name] = receive(torch::empty_like(p, torch::MemoryFormat::Contiguous));
    full.step[name] = receive(torch::empty({}, p.options().dtype(torch::kFloat32)));
  }
  return full;
}

void ShardedAdamW::load_state(const AdamWState& s) {
  if (local_) local_->load_state(s);  // reads only the names it holds
}

std::string ShardedAdamW::summary() const {
  const int64_t world = dist_.world_size();
  if (!sharded_) {
    const auto each = human_bytes(state_bytes_[0]);
    if (world == 1)
      return fmt::format("AdamW state {}{}", each,
                         asked_ ? " (train.shard_optimizer: one process, nothing to shard)" : "");
    return fmt::format("AdamW state {} on each of {} ranks (not sharded; train.shard_optimizer=true divides it)", each,
                       world);
  }
  const int64_t total = std::accumulate(state_bytes_.begin(), state_bytes_.end(), int64_t{0});
  std::vector<std::string> per_rank;
  for (auto b : state_bytes_) per_rank.push_back(human_bytes(b));
  const auto [lo, hi] = std::minmax_element(state_bytes_.begin(), state_bytes_.end());
  const std::string held = world <= 8 ? fmt::format("{} on ranks 0..{}", fmt::join(per_rank, ", "), world - 1)
                                      : fmt::format("{} to {} per rank", human_bytes(*lo), human_bytes(*hi));
  return fmt::format("AdamW state sharded over {} ranks (ZeRO-1): {}, instead of {} on each", world, held,
                     human_bytes(total));
}

}  // namespace xsagpt
