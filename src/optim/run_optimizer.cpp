#include "optim/run_optimizer.h"

#include "optim/grad_clip.h"
#include "optim/schedule.h"
#include "util/error.h"

#include <fmt/format.h>

#include <set>

namespace xsagpt {

namespace {

const char* ns_dtype_name(torch::ScalarType t) {
  return t == torch::kBFloat16 ? "bf16" : t == torch::kFloat64 ? "float64" : "float32";
}

}  // namespace

MuonConfig muon_config(const TrainConfig& t) {
  return {t.muon_momentum, t.muon_ns_steps, t.muon_weight_decay, t.muon_adjust_lr};
}

RunOptimizer::RunOptimizer(std::vector<std::pair<std::string, torch::Tensor>> named_params, const TrainConfig& train,
                           const AdamWConfig& adamw, DistContext& dist)
    : name_(train.optimizer) {
  std::vector<std::pair<std::string, torch::Tensor>> to_adamw, to_muon;
  for (auto& [n, p] : named_params)
    (name_ == Optimizer::kMuon && muon_updates(n, p) ? to_muon : to_adamw).emplace_back(n, p);
  if (name_ == Optimizer::kMuon) {
    TORCH_CHECK(!to_muon.empty(), "train.optimizer=muon: the model has no matrices inside its blocks");
    // μP's rate factors are AdamW's; RunConfig::validate refuses Muon with "mup" by name.
    for (const auto& [n, p] : to_muon)
      TORCH_CHECK(adamw.rate_scale(n) == 1.0, "train.optimizer=muon: ", n, " has a μP rate factor");
    muon_ = std::make_unique<Muon>(std::move(to_muon), muon_config(train));
    muon_scale_ = muon_learning_rate(train, 1.0);
  }
  adamw_ = std::make_unique<ShardedAdamW>(std::move(to_adamw), adamw, dist, train.shard_optimizer);
}

RunOptimizer::~RunOptimizer() = default;

void RunOptimizer::step(double lr, const torch::Tensor& clip) {
  if (muon_) {
    if (clip.defined()) {
      std::vector<torch::Tensor> params;
      for (const auto& [n, p] : muon_->params()) params.push_back(p);
      scale_grads(params, clip);
    }
    muon_->step(lr * muon_scale_);
  }
  adamw_->step(lr, clip);
}

OptimizerState RunOptimizer::state() {
  OptimizerState s;
  s.name = name_;
  s.adamw = adamw_->state();
  if (muon_) s.muon_momentum = muon_->state();
  return s;
}

void RunOptimizer::load_state(const OptimizerState& s, const std::string& file) {
  if (s.name != name_)
    throw ConfigError(fmt::format(
        "{}: the checkpoint holds the state of train.optimizer={} but this run has train.optimizer={}; resume "
        "with --set train.optimizer={}, or start a new run (another --out) to train with {}",
        file, xsagpt::name(s.name), xsagpt::name(name_), xsagpt::name(s.name), xsagpt::name(name_)));
  adamw_->load_state(s.adamw);
  if (muon_) muon_->load_state(s.muon_momentum);
}

std::string RunOptimizer::summary() const {
  if (!muon_) return adamw_->summary();
  int64_t bytes = 0;
  std::set<std::pair<int64_t, int64_t>> shapes;
  int64_t matrices = 0;
  for (const auto& [n, p] : muon_->params()) {
    bytes += static_cast<int64_t>(p.nbytes());
    const auto k = muon_blocks(n);
    matrices += k;
    const auto r = p.size(0) / k, c = p.size(1);
    shapes.insert({std::min(r, c), std::max(r, c)});
  }
  return fmt::format("{}; Muon momentum {:.2f} MiB for {} matrices, Newton-Schulz in {} batched over {} shape(s)",
                     adamw_->summary(), static_cast<double>(bytes) / (1 << 20), matrices,
                     ns_dtype_name(muon_->ns_dtype()), shapes.size());
}

}  // namespace xsagpt
