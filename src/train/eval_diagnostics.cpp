#include "train/eval_diagnostics.h"

#include "analysis/attention_stats.h"

#include <algorithm>
#include <cmath>

namespace xsagpt {

namespace {

// The per-head gates of each layer's step (XSA's g = tanh(alpha)), in float64: the
// gates the layer applies (its step rounds the same numbers to float32).
nlohmann::json gate_values(GPT& model) {
  nlohmann::json layers = nlohmann::json::array();
  bool any = false;
  for (const auto& block : *model->transformer->h) {
    const auto& attn = *block->as<Block>()->attn;
    auto g = attn.step ? attn.step->head_gates() : torch::Tensor();
    if (!g.defined()) {
      layers.push_back(nullptr);
      continue;
    }
    any = true;
    g = g.contiguous();
    const std::vector<double> heads(g.data_ptr<double>(), g.data_ptr<double>() + g.numel());
    double sum = 0;
    for (double x : heads) sum += x;
    nlohmann::json l = {{"mean", sum / static_cast<double>(heads.size())},
                        {"min", *std::min_element(heads.begin(), heads.end())},
                        {"max", *std::max_element(heads.begin(), heads.end())}};
    if (static_cast<int64_t>(heads.size()) <= kGateHeadsListed) l["heads"] = heads;
    layers.push_back(l);
  }
  return any ? layers : nlohmann::json();
}

}  // namespace

nlohmann::json eval_diagnostics(GPT& model, const ValidationSet& val, const TrainConfig& t, torch::Device device,
                                DistContext& dist) {
  nlohmann::json out = nlohmann::json::object();
  if (t.eval_similarity_sequences > 0 && val.num_batches() > 0) {
    auto x = val.batch(0).first;
    x = x.narrow(0, 0, std::min(t.eval_similarity_sequences, x.size(0)))
            .narrow(1, 0, std::min(t.eval_similarity_positions, x.size(1)))
            .to(device);
    const auto layers = analyze_attention(model, {x});
    model->train();
    std::vector<double> cos;
    for (const auto& l : layers) cos.push_back(l.cos_y_v);
    auto mean = dist.mean(torch::tensor(cos, torch::kFloat64).to(device)).to(torch::kCPU).contiguous();
    out["cos_y_v"] = std::vector<double>(mean.data_ptr<double>(), mean.data_ptr<double>() + mean.numel());
  }
  if (auto gates = gate_values(model); !gates.is_null()) out["xsa_gate"] = gates;
  return out;
}

}  // namespace xsagpt
