#include "eval/scorer.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace xsagpt::eval {

int64_t default_batch_tokens(torch::Device device) { return device.is_cuda() ? 16384 : 4096; }

namespace {

// Where one request sits in the padded batch.
struct Row {
  size_t request;
  int64_t start;  // first token of context+continuation in the window
  int64_t len;    // window length: positions fed to the model
};

// Rows of the selected logits at a time for the softmax (bounds the float32 copy).
constexpr int64_t kSoftmaxRows = 2048;

}  // namespace

std::vector<Score> score_requests(GPT& model, const std::vector<TokenRequest>& requests, const ScoreOptions& opts,
                                  const std::function<void(size_t, size_t)>& on_batch) {
  const int64_t block = model->cfg.block_size;
  const auto device = model->parameters().front().device();
  const int64_t budget = opts.batch_tokens > 0 ? opts.batch_tokens : default_batch_tokens(device);

  std::vector<Score> out(requests.size());
  std::vector<Row> rows;
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto& r = requests[i];
    const auto n_ctx = static_cast<int64_t>(r.context.size()), n_cont = static_cast<int64_t>(r.continuation.size());
    out[i].n_tokens = n_cont;
    if (n_cont == 0) continue;  // nothing to predict: log-probability 0
    if (n_cont > block)
      throw RequestError(i, fmt::format("the continuation has {} tokens, more than the model's window "
                                        "(model.block_size {})",
                                        n_cont, block));
    if (n_ctx == 0) throw RequestError(i, "no context token precedes the continuation");
    const int64_t total = n_ctx + n_cont, keep = std::min(total, block + 1);
    rows.push_back({i, total - keep, keep - 1});
  }
  // Longest first, so each batch pads little and the largest pass comes first
  // (an out-of-memory shows at once); ties keep the input order.
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.len > b.len; });

  torch::NoGradGuard no_grad;
  model->eval();
  const auto precision = model->precision_scope(device);  // bf16 weight casts made once for all batches
  size_t done = 0;
  for (size_t first = 0; first < rows.size();) {
    const int64_t width = rows[first].len;
    const size_t n_rows = std::clamp<size_t>(static_cast<size_t>(budget / width), 1, rows.size() - first);
    std::vector<int64_t> ids(n_rows * width, 0), pick, target;
    for (size_t b = 0; b < n_rows; ++b) {
      const auto& row = rows[first + b];
      const auto& r = requests[row.request];
      auto token = [&](int64_t k) {  // k-th token of context+continuation
        const auto n_ctx = static_cast<int64_t>(r.context.size());
        return k < n_ctx ? r.context[k] : r.continuation[k - n_ctx];
      };
      for (int64_t p = 0; p < row.len; ++p) ids[b * width + p] = token(row.start + p);
      const auto n_cont = static_cast<int64_t>(r.continuation.size());
      for (int64_t j = 0; j < n_cont; ++j) {
        pick.push_back(static_cast<int64_t>(b) * width + row.len - n_cont + j);
        target.push_back(r.continuation[j]);
      }
    }
    auto idx = torch::tensor(ids, torch::kLong).view({static_cast<int64_t>(n_rows), width}).to(device);
    auto logits = model->forward(idx).logits;
    logits = logits.reshape({-1, logits.size(-1)});
    auto pick_t = torch::tensor(pick, torch::kLong).to(device);
    auto target_t = torch::tensor(target, torch::kLong).to(device);
    std::vector<torch::Tensor> lp_parts, greedy_parts;
    for (int64_t s = 0; s < pick_t.size(0); s += kSoftmaxRows) {
      const int64_t n = std::min(kSoftmaxRows, pick_t.size(0) - s);
      auto sel = logits.index_select(0, pick_t.narrow(0, s, n)).to(torch::kFloat32);
      auto tgt = target_t.narrow(0, s, n);
      lp_parts.push_back(torch::log_softmax(sel, -1).gather(1, tgt.unsqueeze(1)).squeeze(1));
      greedy_parts.push_back(sel.argmax(-1) == tgt);
    }
    auto lp = torch::cat(lp_parts).to(torch::kCPU, torch::kFloat64).contiguous();
    auto greedy = torch::cat(greedy_parts).to(torch::kCPU).contiguous();
    const double* lp_p = lp.data_ptr<double>();
    const bool* g_p = greedy.data_ptr<bool>();
    size_t k = 0;
    for (size_t b = 0; b < n_rows; ++b) {
      auto& s = out[rows[first + b].request];
      for (int64_t j = 0; j < s.n_tokens; ++j, ++k) {
        s.logprob += lp_p[k];
        s.is_greedy = s.is_greedy && g_p[k];
      }
    }
    first += n_rows;
    done += n_rows;
    if (on_batch) on_batch(done, rows.size());
  }
  return out;
}

}  // namespace xsagpt::eval
