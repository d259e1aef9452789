#include "run/from_checkpoint.h"

#include "config/schema.h"
#include "run/checkpoint.h"
#include "util/test_stop.h"

#include <fmt/format.h>

namespace xsagpt {

namespace fs = std::filesystem;

void load_weights(GPT& model, const std::map<std::string, torch::Tensor>& weights, const std::string& file) {
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) {
    auto it = weights.find(item.key());
    if (it == weights.end()) throw CheckpointError(file + ": no weights for parameter " + item.key());
    if (it->second.sizes() != item.value().sizes())
      throw CheckpointError(fmt::format("{}: parameter {} has shape {}, the model expects {}", file, item.key(),
                                        c10::str(it->second.sizes()), c10::str(item.value().sizes())));
    item.value().copy_(it->second);
  }
}

namespace {

// The newest checkpoint of a run directory, read. A trainer that still runs there
// prunes older checkpoints (train.keep_checkpoints) whenever it saves one, so the
// newest listed may vanish before it is read: then the list is taken again, and a
// file that keeps vanishing is named as pruned rather than blamed as damaged.
Checkpoint load_newest_checkpoint(const fs::path& dir, fs::path& file) {
  constexpr int kTries = 5;
  for (int attempt = 1;; ++attempt) {
    auto all = list_checkpoints(dir);
    if (all.empty()) throw CheckpointError(dir.string() + ": a directory without checkpoints/step_*.pt");
    file = all.back();
    if (attempt == 1) stop_here_for_tests("load:newest-checkpoint-listed");
    try {
      return load_checkpoint(file);
    } catch (const std::exception&) {
      if (fs::exists(file)) throw;  // still there: the file itself is at fault
      if (attempt == kTries)
        throw CheckpointError(fmt::format(
            "{}: the run is live (a trainer saves and prunes checkpoints there) and its newest checkpoint, {}, was "
            "pruned while it was read, {} times; try again, or point at a run that is not training",
            dir.string(), file.filename().string(), kTries));
    }
  }
}

}  // namespace

TrainedModel load_trained_model(const fs::path& path, torch::Device device) {
  fs::path file = path;
  auto ckpt = fs::is_directory(path) ? load_newest_checkpoint(path, file) : load_checkpoint(file);
  if (!ckpt.config.is_object() || !ckpt.config.contains("model"))
    throw CheckpointError(file.string() + ": checkpoint has no model config");
  TrainedModel out;
  out.file = file;
  out.step = ckpt.step;
  if (!ckpt.vocab.is_null()) {
    try {
      out.vocab = vocab_from_json(ckpt.vocab, file.string() + ": vocab");
    } catch (const DataError& e) {
      throw CheckpointError(e.what());
    }
  }
  out.config = std::move(ckpt.config);
  out.model = GPT(model_config_from_json(out.config["model"], file.string() + ": config.model"));
  load_weights(out.model, ckpt.model, file.string());
  out.model->to(device);
  out.model->eval();
  return out;
}

}  // namespace xsagpt
