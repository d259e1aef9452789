// xsagpt_muon_steps: a few training steps of the C++ GPT in float64 with the
// optimizer train.optimizer builds (optim/run_optimizer.h: Muon with AdamW, or AdamW
// alone with the model's μP rate factors), saving what the torch.optim reference
// (tests/python/train/test_muon.py, test_mup.py) needs to replay them: the
// starting weights, each step's gradients and rate, the final weights and which
// parameters Muon took. The reference applies torch.optim.Muon and torch.optim.AdamW
// to the same gradients and must land on the same weights.
//
// Output: a torch.save-style zip archive holding one dict:
//   initial {name: tensor}         unique parameters before the first step
//   grads   {"<step>/<name>": t}   d loss / d parameter at each step (0-based)
//   lrs     [float]                the scheduled rate of each step (AdamW's; Muon's is lr * muon_lr / lr)
//   final   {name: tensor}         parameters after the last step
//   muon    [name]                 the parameters Muon updated
//   train   {key: value}           the resolved train section
#include "config/run_config.h"
#include "distributed/context.h"
#include "model/gpt.h"
#include "optim/run_optimizer.h"
#include "optim/schedule.h"
#include "train/parts.h"
#include "util/ivalue_json.h"
#include "util/torch_save.h"

#include "cli/options.h"
#include <torch/torch.h>

#include <fmt/format.h>

#include <iostream>

namespace {

using namespace xsagpt;

c10::Dict<std::string, torch::Tensor> tensors(const std::vector<std::pair<std::string, torch::Tensor>>& named) {
  c10::Dict<std::string, torch::Tensor> d;
  for (const auto& [n, p] : named) d.insert(n, p.detach().clone());
  return d;
}

int run(int argc, char** argv) {
  cxxopts::Options opts("xsagpt_muon_steps", "Training steps of the C++ GPT in float64, saved for the torch.optim reference.");
  opts.add_options()
    ("model", "model config JSON file", cxxopts::value<std::string>())
    ("train", "JSON file of train.* keys (the others keep their defaults)", cxxopts::value<std::string>())
    ("out", "output file", cxxopts::value<std::string>())
    ("h,help", "show this help");
  opts.parse_positional({"model", "train", "out"});
  opts.positional_help("MODEL.json TRAIN.json OUT");
  auto args = opts.parse(argc, argv);
  if (args.count("help")) { std::cout << opts.help() << "\n"; return 0; }
  for (const char* k : {"model", "train", "out"})
    if (!args.count(k)) throw ConfigError(std::string("missing argument ") + k + "\n" + opts.help());

  const auto model_path = args["model"].as<std::string>(), train_path = args["train"].as<std::string>();
  const auto cfg = model_config_from_json(read_json_file(model_path), model_path);
  TrainConfig train;
  schema::read(read_json_file(train_path), train, train_path);

  torch::manual_seed(static_cast<uint64_t>(train.seed));
  GPT model(cfg);
  model->to(torch::kFloat64);
  auto named = model->unique_named_parameters();
  const auto initial = tensors(named);
  DistContext single;
  RunOptimizer opt(named, train, adamw_config(train, *model), single);

  c10::Dict<std::string, torch::Tensor> grads;
  nlohmann::json lrs = nlohmann::json::array();
  const int64_t T = std::min<int64_t>(cfg.block_size, 16);
  for (int64_t s = 0; s < train.max_steps; ++s) {
    auto idx = torch::randint(cfg.vocab_size, {2, T}, torch::kInt64);
    auto targets = torch::randint(cfg.vocab_size, {2, T}, torch::kInt64);
    model->forward(idx, targets).loss.backward();
    for (const auto& [n, p] : named) grads.insert(fmt::format("{}/{}", s, n), p.grad().detach().clone());
    const double lr = learning_rate(train, s);
    lrs.push_back(lr);
    opt.step(lr);
    for (auto& [n, p] : named) p.mutable_grad().reset();
  }
  nlohmann::json muon = nlohmann::json::array();
  if (opt.muon())
    for (const auto& [n, p] : opt.muon()->params()) muon.push_back(n);

  c10::impl::GenericDict dump(c10::StringType::get(), c10::AnyType::get());
  dump.insert("initial", initial);
  dump.insert("grads", grads);
  dump.insert("lrs", json_to_ivalue(lrs));
  dump.insert("final", tensors(named));
  dump.insert("muon", json_to_ivalue(muon));
  dump.insert("train", json_to_ivalue(schema::write(train)));
  torch_save(dump, args["out"].as<std::string>());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const ConfigError& e) {
    std::cerr << "xsagpt_muon_steps: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "xsagpt_muon_steps: " << e.what() << "\n";
    return 1;
  }
}
