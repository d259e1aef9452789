#include "train/from_checkpoint.h"

#include "config/schema.h"
#include "train/checkpoint.h"

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

TrainedModel load_trained_model(const fs::path& path, torch::Device device) {
  fs::path file = path;
  if (fs::is_directory(path)) {
    auto all = list_checkpoints(path);
    if (all.empty()) throw CheckpointError(path.string() + ": a directory without checkpoints/step_*.pt");
    file = all.back();
  }
  auto ckpt = load_checkpoint(file);
  if (!ckpt.config.is_object() || !ckpt.config.contains("model"))
    throw CheckpointError(file.string() + ": checkpoint has no model config");
  TrainedModel out;
  out.file = file;
  out.step = ckpt.step;
  out.config = std::move(ckpt.config);
  out.model = GPT(model_config_from_json(out.config["model"], file.string() + ": config.model"));
  load_weights(out.model, ckpt.model, file.string());
  out.model->to(device);
  out.model->eval();
  return out;
}

}  // namespace xsagpt
