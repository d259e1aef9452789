// xsagpt_dump_model: builds the C++ GPT from a model config and a seed, runs one
// forward+backward pass on random tokens and writes everything needed to check it
// against the PyTorch reference (scripts/reference/model.py) to one file.
//
// The weights are redrawn first. At the model's own initialisation every LayerNorm
// gain is 1, every bias 0 and pre-activations are so small that GELU is nearly
// linear: a reference that swapped two norms, misplaced a bias or used tanh-GELU
// would still agree. Here gains are 1 + 0.2 g, biases 0.1 g and matrices
// g / sqrt(fan_in), g ~ N(0, 1), so every parameter and nonlinearity shows.
//
// Output: a torch.save-style zip archive holding one dict, which Python reads
// with torch.load(path, weights_only=True):
//   model    {name: tensor}  parameters (a tied head listed under both names, as
//                            PyTorch's state_dict does) and the RoPE buffers
//   config   {key: value}    the resolved model section, every key present
//   idx      int64 (B, T)    input tokens
//   targets  int64 (B, T)    random tokens, about 1 in 8 set to -1 (ignored)
//   logits   (B, T, vocab)
//   loss     scalar          mean cross-entropy over targets != -1
//   grads    {name: tensor}  d loss / d parameter, same names as `model`
#include "config/model_config.h"
#include "model/gpt.h"
#include "util/ivalue_json.h"
#include "util/torch_save.h"

#include "cli/options.h"
#include <torch/torch.h>

#include <cmath>
#include <fstream>
#include <iostream>

namespace {

using namespace xsagpt;


int run(int argc, char** argv) {
  cxxopts::Options opts("xsagpt_dump_model",
                        "One forward+backward pass of the C++ GPT on random tokens, saved for the Python reference.");
  opts.add_options()
    ("config", "model config JSON file", cxxopts::value<std::string>())
    ("seed", "seed for the weights and the tokens", cxxopts::value<uint64_t>())
    ("batch", "batch size B", cxxopts::value<int64_t>())
    ("seq-len", "sequence length T (<= block_size)", cxxopts::value<int64_t>())
    ("out", "output file", cxxopts::value<std::string>())
    ("double", "run in float64 instead of float32")
    ("h,help", "show this help");
  opts.parse_positional({"config", "seed", "batch", "seq-len", "out"});
  opts.positional_help("CONFIG.json SEED B T OUT");
  auto args = opts.parse(argc, argv);
  if (args.count("help")) { std::cout << opts.help() << "\n"; return 0; }
  for (const char* k : {"config", "seed", "batch", "seq-len", "out"})
    if (!args.count(k)) throw ConfigError(std::string("missing argument ") + k + "\n" + opts.help());

  const auto path = args["config"].as<std::string>();
  const auto cfg = model_config_from_json(read_json_file(path), path);
  const int64_t B = args["batch"].as<int64_t>(), T = args["seq-len"].as<int64_t>();
  if (B < 1) throw ConfigError("B: must be >= 1");
  if (T < 1 || T > cfg.block_size)
    throw ConfigError("T: expected 1.." + std::to_string(cfg.block_size) + " (model.block_size), got " + std::to_string(T));

  torch::manual_seed(args["seed"].as<uint64_t>());
  GPT model(cfg);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : model->named_parameters()) {
      auto& t = p.value();
      if (t.dim() == 2) {
        t.normal_(0.0, 1.0 / std::sqrt(static_cast<double>(t.size(1))));
      } else if (p.key().ends_with(".bias")) {
        t.normal_(0.0, 0.1);
      } else {
        t.normal_(1.0, 0.2);  // LayerNorm gain
      }
    }
  }
  if (args.count("double")) model->to(torch::kFloat64);
  auto idx = torch::randint(cfg.vocab_size, {B, T}, torch::kInt64);
  auto targets = torch::randint(cfg.vocab_size, {B, T}, torch::kInt64);
  targets.masked_fill_(torch::rand({B, T}) < 0.125, -1);

  auto out = model->forward(idx, targets);
  out.loss.backward();

  c10::Dict<std::string, torch::Tensor> weights, grads;
  for (const auto& p : model->named_parameters()) {
    weights.insert(p.key(), p.value().detach());
    grads.insert(p.key(), p.value().grad());
  }
  for (const auto& b : model->named_buffers()) weights.insert(b.key(), b.value());

  c10::impl::GenericDict dump(c10::StringType::get(), c10::AnyType::get());
  dump.insert("model", weights);
  dump.insert("config", json_to_ivalue(to_json(cfg)));
  dump.insert("idx", idx);
  dump.insert("targets", targets);
  dump.insert("logits", out.logits.detach());
  dump.insert("loss", out.loss.detach());
  dump.insert("grads", grads);

  torch_save(dump, args["out"].as<std::string>());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const ConfigError& e) {
    std::cerr << "xsagpt_dump_model: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "xsagpt_dump_model: " << e.what() << "\n";
    return 1;
  }
}
