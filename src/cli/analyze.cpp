// `xsagpt analyze`: the attention similarity bias of a trained model (the paper's
// figure 1). For each layer: how alike a head's value vectors are, how much
// attention a token pays itself, and how closely its attention output follows its
// own value (before and, for XSA, after the exclusive step); see
// analysis/attention_stats.h. Prints a table and writes analysis.json:
//   {"attention": "sa"|"xsa", "checkpoint": path,
//    "layers": [{"layer", "value_cos_sim", "attn_diag", "cos_y_v", "cos_z_v" (null for SA layers)}]}
// which scripts/view/plot.py draws.
#include "analysis/attention_stats.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "config/schema.h"
#include "data/loader.h"
#include "train/from_checkpoint.h"
#include "util/atomic_file.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>

namespace xsagpt::cli {

namespace fs = std::filesystem;

namespace {

// Beside the run: RUN/analysis.json for RUN/checkpoints/step_N.pt (where plot.py
// looks), else analysis.json in the checkpoint's folder.
fs::path default_output(const fs::path& ckpt) {
  auto dir = ckpt.parent_path();
  if (dir.filename() == "checkpoints") dir = dir.parent_path();
  return dir / "analysis.json";
}

}  // namespace

int analyze(int argc, char** argv) {
  cxxopts::Options opts("xsagpt analyze",
                        "Per-layer attention statistics of a checkpoint on validation sequences: value cosine\n"
                        "similarity, diagonal attention a_ii, cos(y_i, v_i) and for XSA cos(z_i, v_i).");
  // clang-format off
  opts.add_options()
    ("checkpoint", "checkpoint file, or a run directory (its newest checkpoint)", cxxopts::value<std::string>())
    ("val", "token shards to take sequences from (default: the run's data.val)", cxxopts::value<std::string>())
    ("n,sequences", "sequences to average over", cxxopts::value<int64_t>()->default_value("16"))
    ("t,seq-len", "tokens per sequence (default: the run's train.seq_len)", cxxopts::value<int64_t>())
    ("b,batch", "sequences per forward pass", cxxopts::value<int64_t>()->default_value("4"))
    ("o,out", "JSON output (default: analysis.json in the run directory)", cxxopts::value<std::string>());
  // clang-format on
  add_device_options(opts);
  const auto parsed = parse_checkpoint_command(opts, argc, argv);
  if (!parsed) return 0;
  const auto& args = *parsed;
  const int64_t n_seq = args["sequences"].as<int64_t>(), batch_arg = args["batch"].as<int64_t>();
  if (n_seq < 1) throw ConfigError("--sequences: must be >= 1");
  if (batch_arg < 1) throw ConfigError("--batch: must be >= 1");

  setup_threads(args);
  const auto device = device_option(args);
  auto trained = load_trained_model(args["checkpoint"].as<std::string>(), device);
  const auto& mc = trained.model->cfg;
  const auto& cfg = trained.config;
  std::string val =
      args.count("val") ? args["val"].as<std::string>() : cfg.value("data", json::object()).value("val", std::string());
  if (val.empty()) throw ConfigError("--val: the checkpoint's config names no data.val; give the shards to use");
  int64_t T = args.count("seq-len") ? args["seq-len"].as<int64_t>()
                                    : cfg.value("train", json::object()).value("seq_len", mc.block_size);
  if (T < 2 || T > mc.block_size)
    throw ConfigError(fmt::format("--seq-len: expected 2..{} (model.block_size), got {}", mc.block_size, T));

  LoaderOptions lo;
  lo.pattern = val;
  lo.batch_size = std::min(batch_arg, n_seq);
  lo.seq_len = T;
  lo.vocab_size = mc.vocab_size;
  ValidationSet set(lo, n_seq * T);
  if (set.num_batches() == 0)
    throw ConfigError(fmt::format("{}: holds no full batch of {} sequences of {} tokens", val, lo.batch_size, T));
  std::vector<torch::Tensor> batches;
  for (int64_t i = 0; i < set.num_batches(); ++i) batches.push_back(set.batch(i).first.to(device));
  if (set.num_sequences() < n_seq)
    spdlog::warn("using {} sequences (whole batches of {} that the shards hold), not {}", set.num_sequences(),
                 lo.batch_size, n_seq);
  spdlog::info("{} (step {}): {} layers, attention {}; {} sequences of {} tokens from {}", trained.file.string(),
               trained.step, mc.n_layer, mc.attention, set.num_sequences(), T, val);

  const auto layers = analyze_attention(trained.model, batches);

  json out = {{"attention", mc.attention}, {"checkpoint", trained.file.string()}, {"layers", json::array()}};
  std::cout << fmt::format("{:>5}  {:>13}  {:>9}  {:>8}  {:>8}\n", "layer", "value_cos_sim", "attn_diag", "cos(y,v)",
                           "cos(z,v)");
  for (const auto& l : layers) {
    out["layers"].push_back({{"layer", l.layer},
                             {"value_cos_sim", l.value_cos_sim},
                             {"attn_diag", l.attn_diag},
                             {"cos_y_v", l.cos_y_v},
                             {"cos_z_v", l.cos_z_v ? json(*l.cos_z_v) : json(nullptr)}});
    std::cout << fmt::format("{:>5}  {:>13.4f}  {:>9.4f}  {:>8.4f}  {:>8}\n", l.layer, l.value_cos_sim, l.attn_diag,
                             l.cos_y_v, l.cos_z_v ? fmt::format("{:.4f}", *l.cos_z_v) : "-");
  }
  const fs::path path = args.count("out") ? fs::path(args["out"].as<std::string>()) : default_output(trained.file);
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  write_file_atomic(path, out.dump(2) + "\n");
  spdlog::info("wrote {}", path.string());
  return 0;
}

}  // namespace xsagpt::cli
