// A trained model rebuilt from a checkpoint, for the tools that read one
// (analyze, sample). The checkpoint's config.model gives the architecture (keys it
// lacks take today's defaults, so older checkpoints still load); weights are copied
// in by name and every parameter must be present with its shape.
#pragma once

#include "data/vocab.h"
#include "model/gpt.h"

#include <nlohmann/json.hpp>

#include <filesystem>

namespace xsagpt {

struct TrainedModel {
  GPT model{nullptr};          // in eval mode, on the requested device
  nlohmann::json config;       // the run config saved with the checkpoint
  ShardVocab vocab;            // the compact vocabulary it was trained on (size 0: GPT-2 ids)
  std::filesystem::path file;  // the checkpoint read
  int64_t step = 0;
};

// `path` is a checkpoint file, or a run directory (its newest checkpoint; when a trainer
// still running there prunes it before it is read, the newest then).
// Throws CheckpointError / ConfigError naming the file.
TrainedModel load_trained_model(const std::filesystem::path& path, torch::Device device);

// Copies `weights` into the model's parameters by name; throws CheckpointError
// naming `file` for a missing parameter or a shape mismatch.
void load_weights(GPT& model, const std::map<std::string, torch::Tensor>& weights, const std::string& file);

}  // namespace xsagpt
