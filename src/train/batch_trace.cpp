// The test trace of the micro-batches a rank trains on (see batch_trace.h).
#include "train/batch_trace.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <vector>

namespace xsagpt {

BatchTrace::BatchTrace(int64_t rank) {
  const char* dir = std::getenv("XSAGPT_TEST_BATCH_TRACE");
  if (!dir || !*dir) return;
  const auto path = std::filesystem::path(dir) / fmt::format("rank_{}.jsonl", rank);
  out_.open(path, std::ios::app);
  if (!out_) throw std::runtime_error("XSAGPT_TEST_BATCH_TRACE: cannot open " + path.string());
}

void BatchTrace::record(int64_t step, const torch::Tensor& inputs, const torch::Tensor& targets) {
  if (!out_.is_open()) return;
  const auto x = inputs.contiguous(), y = targets.contiguous();
  const int64_t B = x.size(0), T = x.size(1);
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t* in = x.data_ptr<int64_t>() + b * T;
    std::vector<int64_t> ids(in, in + T);
    ids.push_back(y.data_ptr<int64_t>()[b * T + T - 1]);
    rows.push_back(std::move(ids));
  }
  out_ << nlohmann::json{{"step", step}, {"sequences", rows}}.dump() << '\n' << std::flush;
}

}  // namespace xsagpt
