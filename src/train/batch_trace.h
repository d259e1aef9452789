// For tests: the token ids of every micro-batch a rank trains on. When
// $XSAGPT_TEST_BATCH_TRACE names a folder, each rank appends one JSON line per
// micro-batch to rank_<R>.jsonl there: {"step": the optimizer step it belongs to,
// "sequences": [the T+1 token ids of each sequence]}. A resume on another number of
// ranks promises the data order of the uninterrupted run, no sequence skipped or read
// twice; tests hold it to that by rebuilding each step's sequences from the shards
// themselves, not through the loader's arithmetic. Otherwise it costs one getenv per run.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <fstream>

namespace xsagpt {

class BatchTrace {
 public:
  explicit BatchTrace(int64_t rank);  // inactive unless the variable is set
  // inputs and targets as the loader gives them (int64 on the CPU, targets shifted by one).
  void record(int64_t step, const torch::Tensor& inputs, const torch::Tensor& targets);

 private:
  std::ofstream out_;
};

}  // namespace xsagpt
