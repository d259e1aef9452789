// `xsagpt analyze`: the attention similarity bias of a trained model (the paper's
// figure 1). For each layer: how alike a head's value vectors are, how much
// attention a token pays itself, and how closely its attention output follows its
// own value (before and, for XSA, after the exclusive step); see
// analysis/attention_stats.h. Prints a table and writes analysis.json:
//   {"attention": model.attention, "variant": the model's variant name (AttentionSpec::name),
//    "description": the attention in words (AttentionSpec::describe), "checkpoint": path,
//    "layers": [{"layer", "value_cos_sim", "attn_diag", "cos_y_v", "cos_z_v" (null for SA layers),
//                "description" (the layer's attention in words)}]}
// which scripts/view/plot.py draws.
//
// With --positions, instead: the validation loss by token position in log2 buckets
// (analysis/position_loss.h), on a fixed token budget, in the run's own runtime, so
// that the buckets' token-weighted mean is the val loss the run logged for the same
// batches. Writes loss_by_position.json:
//   {"checkpoint", "step", "attention", "variant", "description" (as analysis.json's), "config" (the run's),
//    "val", "seq_len", "batch",
//    "sequences", "runtime", "tokens", "mean_loss",
//    "buckets": [{"first", "last", "tokens", "mean_loss"}]}
// which scripts/view/plot_positions.py compares across variants. It is its own mode of
// analyze rather than a command: the same input (a checkpoint and its val shards),
// the same options and the same place for its output, beside the run.
#include "analysis/attention_stats.h"
#include "analysis/position_loss.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "config/run_config.h"
#include "config/schema.h"
#include "data/loader.h"
#include "data/vocab.h"
#include "run/from_checkpoint.h"
#include "util/atomic_file.h"
#include "util/utf8.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>

namespace xsagpt::cli {

namespace fs = std::filesystem;

namespace {

// Beside the run: RUN/<name> for RUN/checkpoints/step_N.pt (where plot.py looks),
// else <name> in the checkpoint's folder.
fs::path default_output(const fs::path& ckpt, const std::string& name) {
  auto dir = ckpt.parent_path();
  if (dir.filename() == "checkpoints") dir = dir.parent_path();
  return dir / name;
}

// The runtime the run computed its val loss in (train.kernels, precision, loss chunk),
// from the checkpoint's config; keys it lacks take today's defaults.
Runtime run_runtime(const json& cfg, bool cuda) {
  TrainConfig t;
  const auto train = cfg.value("train", json::object());
  t.kernels = train.value("kernels", t.kernels);
  t.precision = train.value("precision", t.precision);
  t.loss_chunk = train.value("loss_chunk", t.loss_chunk);
  return runtime_of(t, cuda);
}

// What every reader of shards checks before a model reads them (data/vocab.h): the val
// shards hold the ids of the vocabulary the checkpoint records, each below its vocab_size.
void check_val_vocab(const TrainedModel& trained, const ValidationSet& set) {
  std::vector<const ShardInfo*> shards;
  for (const auto& s : set.shards()) shards.push_back(&s);
  check_shards_for_model(shards, &trained.vocab, trained.model->cfg.vocab_size, trained.file.string());
}

// --positions: the loss by position of `trained` on `set`, as JSON.
json positions_json(TrainedModel& trained, const ValidationSet& set, const torch::Device& device, const json& meta) {
  const auto r = loss_by_position(trained.model, set, device);
  json out = meta;
  out["tokens"] = r.tokens;
  out["mean_loss"] = r.mean_loss;
  out["buckets"] = json::array();
  std::cout << fmt::format("{:>13}  {:>10}  {:>9}\n", "positions", "tokens", "loss");
  for (const auto& b : r.buckets) {
    out["buckets"].push_back({{"first", b.first}, {"last", b.last}, {"tokens", b.tokens}, {"mean_loss", b.mean_loss}});
    std::cout << fmt::format("{:>13}  {:>10}  {:>9.4f}\n",
                             b.first == b.last ? std::to_string(b.first) : fmt::format("{}-{}", b.first, b.last),
                             b.tokens, b.mean_loss);
  }
  std::cout << fmt::format("{:>13}  {:>10}  {:>9.4f}\n", "all", r.tokens, r.mean_loss);
  return out;
}

// The model's attention as analyze's outputs name it: its kind, its variant name (as
// config.json's "variant") and the same in words.
json attention_names(const ModelConfig& mc) {
  return {{"attention", mc.attention}, {"variant", mc.spec().name()}, {"description", mc.spec().describe()}};
}

void write_output(const fs::path& path, const json& out) {
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  write_file_atomic(path, out.dump(2) + "\n");
  spdlog::info("wrote {}", path.string());
}

// --positions: the run's own val batches by default, the same sequences in the same
// batches as the val loss it logged, in the run's runtime; loss_by_position.json.
int write_positions(TrainedModel& trained, const cxxopts::ParseResult& args, const torch::Device& device,
                    LoaderOptions lo, const fs::path& out) {
  const auto& mc = trained.model->cfg;
  const auto& cfg = trained.config;
  const auto train = cfg.value("train", json::object());
  const int64_t T = lo.seq_len;
  lo.batch_size = args.count("batch") ? args["batch"].as<int64_t>() : train.value("micro_batch", int64_t{4});
  const int64_t budget =
      args.count("tokens") ? args["tokens"].as<int64_t>() : train.value("eval_tokens", int64_t{1} << 20);
  if (budget < T) throw ConfigError(fmt::format("--tokens: {} is less than one sequence of {} tokens", budget, T));
  ValidationSet set(lo, budget);
  check_val_vocab(trained, set);
  const auto rt = run_runtime(cfg, device.is_cuda());
  trained.model->set_runtime(rt);
  spdlog::info(
      "{} (step {}): {} layers, attention {}; loss by position on {} sequences of {} tokens from {} "
      "({}, kernels {}, loss chunk {})",
      trained.file.string(), trained.step, mc.n_layer, mc.spec().describe(), set.num_sequences(), T, lo.pattern,
      rt.bf16 ? "bf16" : "fp32", describe(rt.kernels), rt.loss_chunk);
  json meta = {
      {"checkpoint", utf8::escape_invalid(trained.file.string())},  // JSON holds UTF-8 only
      {"step", trained.step},
      {"config", cfg},
      {"val", utf8::escape_invalid(lo.pattern)},
      {"seq_len", T},
      {"batch", lo.batch_size},
      {"sequences", set.num_sequences()},
      {"device", device.str()},
      {"runtime",
       {{"precision", rt.bf16 ? "bf16" : "fp32"}, {"kernels", describe(rt.kernels)}, {"loss_chunk", rt.loss_chunk}}}};
  meta.update(attention_names(mc));
  write_output(out.empty() ? default_output(trained.file, "loss_by_position.json") : out,
               positions_json(trained, set, device, meta));
  return 0;
}

// The attention statistics of --sequences sequences, printed and written to analysis.json.
int write_statistics(TrainedModel& trained, const cxxopts::ParseResult& args, const torch::Device& device,
                     LoaderOptions lo, const fs::path& out_path) {
  const auto& mc = trained.model->cfg;
  const int64_t n_seq = args["sequences"].as<int64_t>(), T = lo.seq_len;
  lo.batch_size = std::min(args.count("batch") ? args["batch"].as<int64_t>() : int64_t{4}, n_seq);
  ValidationSet set(lo, n_seq * T);
  check_val_vocab(trained, set);
  if (set.num_batches() == 0)
    throw ConfigError(
        fmt::format("{}: holds no full batch of {} sequences of {} tokens", lo.pattern, lo.batch_size, T));
  std::vector<torch::Tensor> batches;
  for (int64_t i = 0; i < set.num_batches(); ++i) batches.push_back(set.batch(i).first.to(device));
  if (set.num_sequences() < n_seq)
    spdlog::warn("using {} sequences (whole batches of {} that the shards hold), not {}", set.num_sequences(),
                 lo.batch_size, n_seq);
  spdlog::info("{} (step {}): {} layers, attention {}; {} sequences of {} tokens from {}", trained.file.string(),
               trained.step, mc.n_layer, mc.spec().describe(), set.num_sequences(), T, lo.pattern);

  const auto layers = analyze_attention(trained.model, batches);
  json out = attention_names(mc);
  out["checkpoint"] = utf8::escape_invalid(trained.file.string());  // JSON holds UTF-8 only
  out["layers"] = json::array();
  std::cout << fmt::format("{:>5}  {:>13}  {:>9}  {:>8}  {:>8}\n", "layer", "value_cos_sim", "attn_diag", "cos(y,v)",
                           "cos(z,v)");
  for (const auto& l : layers) {
    out["layers"].push_back({{"layer", l.layer},
                             {"value_cos_sim", l.value_cos_sim},
                             {"attn_diag", l.attn_diag},
                             {"cos_y_v", l.cos_y_v},
                             {"cos_z_v", l.cos_z_v ? json(*l.cos_z_v) : json(nullptr)},
                             {"description", l.description}});
    std::cout << fmt::format("{:>5}  {:>13.4f}  {:>9.4f}  {:>8.4f}  {:>8}\n", l.layer, l.value_cos_sim, l.attn_diag,
                             l.cos_y_v, l.cos_z_v ? fmt::format("{:.4f}", *l.cos_z_v) : "-");
  }
  write_output(out_path.empty() ? default_output(trained.file, "analysis.json") : out_path, out);
  return 0;
}

}  // namespace

int analyze(int argc, char** argv) {
  cxxopts::Options opts("xsagpt analyze",
                        "Per-layer attention statistics of a checkpoint on validation sequences: value cosine\n"
                        "similarity, diagonal attention a_ii, cos(y_i, v_i) and for XSA cos(z_i, v_i).\n"
                        "With --positions: the validation loss by token position in log2 buckets (1, 2-3, 4-7, ...),\n"
                        "on --tokens tokens, in the run's kernels and precision; the buckets' token-weighted mean is\n"
                        "the run's val loss on the same batches. scripts/view/plot_positions.py compares variants.");
  // clang-format off
  opts.add_options()
    ("checkpoint", "checkpoint file, or a run directory (its newest checkpoint)", cxxopts::value<std::string>())
    ("positions", "the loss by token position instead of the attention statistics")
    ("val", "token shards to take sequences from (default: the run's data.val)", cxxopts::value<std::string>())
    ("n,sequences", "attention statistics: sequences to average over", cxxopts::value<int64_t>()->default_value("16"))
    ("tokens", "--positions: token budget, whole sequences from the start of the val shards (default: the run's train.eval_tokens)", cxxopts::value<int64_t>())
    ("t,seq-len", "tokens per sequence (default: the run's train.seq_len)", cxxopts::value<int64_t>())
    ("b,batch", "sequences per forward pass (default: 4; --positions: the run's train.micro_batch)", cxxopts::value<int64_t>())
    ("o,out", "JSON output (default: analysis.json, or with --positions loss_by_position.json, in the run directory)", cxxopts::value<std::string>());
  // clang-format on
  add_device_options(opts);
  const auto parsed = parse_checkpoint_command(opts, argc, argv);
  if (!parsed) return 0;
  const auto& args = *parsed;
  const bool positions = args.count("positions") > 0;
  const int64_t n_seq = args["sequences"].as<int64_t>();
  if (n_seq < 1) throw ConfigError("--sequences: must be >= 1");
  if (args.count("batch") && args["batch"].as<int64_t>() < 1) throw ConfigError("--batch: must be >= 1");
  if (args.count("tokens") && args["tokens"].as<int64_t>() < 1) throw ConfigError("--tokens: must be >= 1");
  if (!positions && args.count("tokens")) throw ConfigError("--tokens: only with --positions (else --sequences)");
  if (positions && args.count("sequences")) throw ConfigError("--sequences: not with --positions (use --tokens)");

  setup_threads(args);
  const auto device = device_option(args);
  auto trained = load_trained_model(args["checkpoint"].as<std::string>(), device);
  const auto& mc = trained.model->cfg;
  const auto& cfg = trained.config;
  std::string val =
      args.count("val") ? args["val"].as<std::string>() : cfg.value("data", json::object()).value("val", std::string());
  if (val.empty()) throw ConfigError("--val: the checkpoint's config names no data.val; give the shards to use");
  const int64_t T = args.count("seq-len") ? args["seq-len"].as<int64_t>()
                                          : cfg.value("train", json::object()).value("seq_len", mc.block_size);
  if (T < 2 || T > mc.block_size)
    throw ConfigError(fmt::format("--seq-len: expected 2..{} (model.block_size), got {}", mc.block_size, T));

  LoaderOptions lo;
  lo.pattern = val;
  lo.seq_len = T;
  lo.vocab_size = mc.vocab_size;
  const fs::path out = args.count("out") ? fs::path(args["out"].as<std::string>()) : fs::path();
  if (positions) return write_positions(trained, args, device, lo, out);
  return write_statistics(trained, args, device, lo, out);
}

}  // namespace xsagpt::cli
