// Validation loss by token position in log2 buckets (analysis/position_loss.h).
#include "analysis/position_loss.h"

#include <algorithm>
#include <cmath>

namespace xsagpt {

std::vector<std::pair<int64_t, int64_t>> log2_position_buckets(int64_t T) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t first = 1; first <= T; first *= 2) out.emplace_back(first, std::min(2 * first - 1, T));
  return out;
}

PositionLoss loss_by_position(GPT& model, const ValidationSet& val, torch::Device device) {
  TORCH_CHECK(val.num_batches() > 0, "loss_by_position: an empty validation set");
  model->eval();
  torch::Tensor sum, count;  // per position, (T): summed losses and targets counted, on the device
  for (int64_t i = 0; i < val.num_batches(); ++i) {
    auto [x, y] = val.batch(i);
    x = x.to(device, true), y = y.to(device, true);
    const auto losses = model->token_losses(x, y).to(torch::kFloat64).sum(0);  // ignored targets are 0
    const auto n = (y != -1).sum(0).to(torch::kFloat64);
    sum = sum.defined() ? sum + losses : losses;
    count = count.defined() ? count + n : n;
  }
  const auto s = sum.cpu(), c = count.cpu();  // one sync, at the end
  const auto* ps = s.data_ptr<double>();
  const auto* pc = c.data_ptr<double>();
  PositionLoss out;
  double total = 0;
  for (const auto& [first, last] : log2_position_buckets(s.size(0))) {
    PositionBucket b{first, last};
    double bucket_sum = 0;
    for (int64_t p = first; p <= last; ++p) {
      bucket_sum += ps[p - 1];
      b.tokens += static_cast<int64_t>(pc[p - 1]);
    }
    b.mean_loss = b.tokens > 0 ? bucket_sum / static_cast<double>(b.tokens) : NAN;
    total += bucket_sum;
    out.tokens += b.tokens;
    out.buckets.push_back(b);
  }
  out.mean_loss = out.tokens > 0 ? total / static_cast<double>(out.tokens) : NAN;
  return out;
}

}  // namespace xsagpt
