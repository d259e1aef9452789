// `xsagpt info`: what a config costs before anyone spends GPU hours on it.
#include "cli/commands.h"
#include "cli/options.h"
#include "config/kernel_fit.h"
#include "config/model_section.h"
#include "config/run_config.h"
#include "model/counts.h"
#include "model/mup.h"
#include "sweep/sweep_file.h"
#include "train/memory_check.h"
#include "train/run_check.h"

#include <fmt/format.h>

#include <iostream>

namespace xsagpt::cli {

namespace {

std::string human(double n, const char* unit = "") {
  const char* suffix[] = {"", "K", "M", "B", "T"};
  int i = 0;
  while (std::abs(n) >= 1000 && i < 4) n /= 1000, ++i;
  return fmt::format("{:.2f}{}{}", n, suffix[i], unit);
}

std::string gib(double bytes) { return fmt::format("{:.2f} GiB", bytes / (1024.0 * 1024 * 1024)); }

const char* key_type_name(KeyType t) {
  switch (t) {
    case KeyType::kChoice: return "choice";
    case KeyType::kLayers: return "layers";
    case KeyType::kBool: return "bool";
    case KeyType::kInteger: return "integer";
    case KeyType::kNumber: return "number";
  }
  return "?";
}

// A kind's row as `config --json` lists it; "not_exportable" only on a row that has a reason.
json kind_json(const AttentionKind& k) {
  json keys = json::object();
  for (const auto& key : k.keys) {
    keys[key.name] = {{"type", key_type_name(key.type)}, {"default", key.default_value}, {"help", key.help}};
    if (key.type == KeyType::kChoice) keys[key.name]["choices"] = key.choices;
  }
  json out = {{"name", k.name}, {"help", k.help}, {"keys", keys}, {"step", k.step}, {"kernel", k.kernel}};
  if (*k.not_exportable) out["not_exportable"] = k.not_exportable;
  return out;
}

// The model --config names, with --set's model.* keys read through train's own
// parser, so that a key means here what it means there.
ModelConfig info_model(const cxxopts::ParseResult& args) {
  if (!args.count("config")) throw ConfigError("--config: required (e.g. --config paper-0.7b)");
  auto cfg = load_model_config(args["config"].as<std::string>());
  if (!args.count("set")) return cfg;
  json raw = {{"model", to_json(cfg)}};
  apply_overrides(raw, args["set"].as<std::vector<std::string>>());
  for (const auto& [section, _] : raw.items())
    if (section != "model")
      throw ConfigError("--set: info takes model.* keys; " + section +
                        " settings are its own options (--micro-batch, --seq-len, --precision, --recompute, "
                        "--optimizer, --kernels, --loss-chunk, --optimizer-shards)");
  read_model_section(raw["model"], cfg, "--set model");
  check_kind_overrides(cfg, args["set"].as<std::vector<std::string>>(), "--set model");
  cfg.validate("--set model");
  return cfg;
}

// The run info sizes: the model with the train.* values of info's own options, and
// the runtime a GPU would build from them, which train's memory check reads.
struct InfoRun {
  RunConfig run;
  Runtime rt;
  int64_t shards = 1;
};

InfoRun info_run(const cxxopts::ParseResult& args, const ModelConfig& cfg) {
  const int64_t T = args.count("seq-len") ? args["seq-len"].as<int64_t>() : cfg.block_size;
  const int64_t B = args["micro-batch"].as<int64_t>();
  if (T <= 0 || T > cfg.block_size)
    throw ConfigError(fmt::format("--seq-len: expected 1..{} (model.block_size), got {}", cfg.block_size, T));
  if (B <= 0) throw ConfigError("--micro-batch: must be > 0");
  InfoRun r;
  r.rt.bf16 = parse_precision(args["precision"].as<std::string>(), /*cuda=*/true, "--precision");
  r.rt.recompute = parse_recompute(args["recompute"].as<std::string>(), "--recompute");
  r.rt.loss_chunk = args["loss-chunk"].as<int64_t>();
  r.rt.kernels = parse_kernels(args["kernels"].as<std::string>(), /*cuda=*/true, "--kernels");
  r.shards = args["optimizer-shards"].as<int64_t>();
  if (r.shards < 1) throw ConfigError("--optimizer-shards: must be >= 1");
  auto& run = r.run;
  run.model = cfg;
  run.train.micro_batch = B;
  run.train.seq_len = T;
  run.train.optimizer = schema::enum_from_name<Optimizer>(args["optimizer"].as<std::string>(), "--optimizer");
  check_optimizer_fits_model(run.train.optimizer, cfg, "--optimizer");
  run.train.shard_optimizer = r.shards > 1;
  if (run.train.shard_optimizer && !shardable(run.train.optimizer))
    throw ConfigError(fmt::format("--optimizer-shards: train.shard_optimizer is not supported with train.optimizer={}",
                                  name(run.train.optimizer)));
  if (r.rt.loss_chunk < 0) throw ConfigError("--loss-chunk: must be >= 0");
  // What train would refuse on a GPU, refused here in train's words: an estimate would
  // say the run fits when it cannot start.
  check_runnable(run, r.rt, std::nullopt, "--kernels");
  return r;
}

void print_info_json(const InfoRun& r, const ParamCounts& p, double flops, const MemoryEstimate& mem) {
  const json j = {{"config", to_json(r.run.model)},
                  {"params_total", p.total},
                  {"params_non_embedding", p.non_embedding},
                  {"params_embedding", p.embedding},
                  {"flops_per_token", flops},
                  {"seq_len", r.run.train.seq_len},
                  {"micro_batch", r.run.train.micro_batch},
                  {"precision", r.rt.bf16 ? "bf16" : "fp32"},
                  {"recompute", name(r.rt.recompute)},
                  {"loss_chunk", r.rt.loss_chunk},
                  {"optimizer", name(r.run.train.optimizer)},
                  {"optimizer_shards", r.shards},
                  {"kernels", describe(r.rt.kernels)},
                  {"memory_bytes",
                   {{"params", mem.params_bytes},
                    {"grads", mem.grads_bytes},
                    {"weight_copies", mem.weight_copies_bytes},
                    {"optimizer", mem.optimizer_bytes},
                    {"activations", mem.activations_bytes},
                    {"logits", mem.logits_bytes},
                    {"recompute", mem.recompute_bytes},
                    {"optimizer_step", mem.optimizer_step_bytes},
                    {"rope_tables", mem.rope_tables_bytes},
                    {"total", mem.total()}}}};
  std::cout << j.dump(2) << "\n";
}

void print_info_table(const InfoRun& r, const ParamCounts& p, double flops, const MemoryEstimate& mem) {
  const auto& cfg = r.run.model;
  const auto& rt = r.rt;
  const int64_t T = r.run.train.seq_len, B = r.run.train.micro_batch;
  // Which weight copies the estimate holds: bf16 (weights kernel), e4m3 of the blocks' matrices (fp8), or both.
  const auto& k = rt.kernels;
  const std::string copies = k.fp8 ? (rt.bf16 && k.weights ? "bf16 + e4m3" : "e4m3") : "bf16";
  std::cout << fmt::format(
      "model        {} layers, d_model {}, {} heads x {} (inner {}), mlp {}, vocab {}, attention {}\n{}"
      "parameters   {} total, {} non-embedding, {} embedding{}\n"
      "FLOPs/token  {} (training, seq_len {})\n"
      "memory       {} estimated at micro-batch {} x {} tokens, {} activations, checkpointing {}, loss chunk {}:\n"
      "             weights {}{}, grads {}, {} {}{}, RoPE tables {}, activations {}, logits {}{}{}\n",
      cfg.n_layer, cfg.d_model, cfg.n_head, cfg.head_dim, cfg.inner_dim(), cfg.mlp_dim(), cfg.vocab_size,
      cfg.spec().describe(), cfg.mup() ? "             parametrization " + describe_parametrization(cfg) + "\n" : "",
      human(p.total), human(p.non_embedding), human(p.embedding),
      cfg.tie_embeddings ? " (head tied)" : "", human(flops, "FLOP"), T, gib(mem.total()), B, T,
      rt.bf16 ? "bf16" : "fp32", name(rt.recompute), rt.loss_chunk ? std::to_string(rt.loss_chunk) : "off",
      gib(mem.params_bytes),
      mem.weight_copies_bytes > 0 ? fmt::format(" + {} copies {}", copies, gib(mem.weight_copies_bytes)) : "",
      gib(mem.grads_bytes), r.run.train.optimizer == Optimizer::kMuon ? "Muon + AdamW" : "AdamW",
      gib(mem.optimizer_bytes), r.shards > 1 ? fmt::format(" (1/{} per rank)", r.shards) : "",
      gib(mem.rope_tables_bytes), gib(mem.activations_bytes), gib(mem.logits_bytes),
      mem.recompute_bytes > 0 ? ", one layer recomputed " + gib(mem.recompute_bytes) : "",
      mem.optimizer_step_bytes > 0 ? ", Muon's step " + gib(mem.optimizer_step_bytes) + " (after backward)" : "");
}

}  // namespace

int info(int argc, char** argv) {
  cxxopts::Options opts("xsagpt info", "Parameter counts, FLOPs per token and training memory of a model config.");
  // clang-format off
  opts.add_options()
    ("c,config", "model config: a name in configs/model/ or a JSON file", cxxopts::value<std::string>())
    ("s,set", "override a model key as train's --set does: model.key=value (repeatable), e.g. --set model.block_size=16384 to size a longer context; the run's train.* settings are this command's own options", cxxopts::value<std::vector<std::string>>())
    ("b,micro-batch", "micro-batch for the memory estimate", cxxopts::value<int64_t>()->default_value("8"))
    ("t,seq-len", "sequence length (default: the model's block_size)", cxxopts::value<int64_t>())
    ("precision", "activations for the memory estimate: bf16, fp32 or auto (bf16, as on a GPU)", cxxopts::value<std::string>()->default_value("bf16"))
    ("recompute", "activation checkpointing for the memory estimate: none, mlp or block (train.activation_checkpointing)", cxxopts::value<std::string>()->default_value("none"))
    ("optimizer", "train.optimizer for the memory estimate: adamw, or muon (one momentum buffer for the block matrices instead of two AdamW moments)", cxxopts::value<std::string>()->default_value("adamw"))
    ("optimizer-shards", "ranks sharing the AdamW state for the memory estimate (train.shard_optimizer over N GPUs)", cxxopts::value<int64_t>()->default_value("1"))
    ("kernels", "train.kernels of the run (for the memory estimate, as on a GPU)", cxxopts::value<std::string>()->default_value("auto"))
    ("loss-chunk", "LM-head loss in chunks of this many tokens for the memory estimate (train.loss_chunk; 0: whole)", cxxopts::value<int64_t>()->default_value("0"))
    ("json", "print JSON instead of a table");
  // clang-format on
  const auto parsed = parse_command(opts, argc, argv);
  if (!parsed) return 0;
  const auto& args = *parsed;
  const auto r = info_run(args, info_model(args));
  const auto& cfg = r.run.model;
  const auto p = count_params(cfg);
  const double flops = flops_per_token(cfg, r.run.train.seq_len);
  const auto mem = check_memory(r.run, r.rt, r.shards, /*cuda=*/true, std::nullopt, "").estimate;
  if (args.count("json"))
    print_info_json(r, p, flops, mem);
  else
    print_info_table(r, p, flops, mem);
  return 0;
}

int config_reference(int argc, char** argv) {
  cxxopts::Options opts("xsagpt config", "Print the configuration reference as a Markdown table.");
  opts.add_options()(
      "json",
      "print instead what scripts read: {\"kernels\": [{\"name\", \"help\", \"auto\", \"fused\", "
      "\"default_model\", \"tests\"}, ...]}, train.kernels' names in order, each with what it fuses, whether "
      "\"auto\" (on CUDA) and \"fused\" take it, whether it runs a model of the model.* defaults (gelu needs "
      "model.gelu \"tanh\") and the CUDA tests that speak for it (gtest filter patterns), and {\"attention_kinds\": "
      "[{\"name\", \"help\", \"keys\", \"step\", \"kernel\", \"not_exportable\"}, ...]}, model.attention's "
      "values in order (the first is the default), each with the model.* keys it owns ({key: {\"type\", "
      "\"default\", \"help\", \"choices\"}}: type \"choice\", \"layers\", \"bool\", \"integer\" or \"number\"; "
      "choices for a choice), whether it changes attention's output, the train.kernels row that runs that step "
      "(\"\": ATen ops) and, only where an export cannot write it, why (\"not_exportable\"); and "
      "{\"sweep_file_sections\": [...]}, the sections of the sweep file whose keys --sweep prints");
  std::string sections;
  for (const auto& s : sweep_file_sections()) sections += (sections.empty() ? "" : ", ") + std::string(s.name);
  opts.add_options()("sweep",
                     "print instead one section of the sweep file's keys as a Markdown table (" + sections +
                         "; docs/sweeps-and-plots.md and docs/cluster.md hold them)",
                     cxxopts::value<std::string>());
  const auto parsed = parse_command(opts, argc, argv);
  if (!parsed) return 0;
  if (parsed->count("sweep")) {
    std::cout << sweep_file_reference((*parsed)["sweep"].as<std::string>());
    return 0;
  }
  if (parsed->count("json")) {
    json kernels = json::array();
    for (const auto& k : kernel_table()) {
      // Asked of the same check train and bench apply, so a script never times a
      // variant the program would refuse on the shipped models.
      bool default_model = true;
      try {
        check_kernels_fit_model(parse_kernels(k.name, /*cuda=*/true), ModelConfig{});
      } catch (const ConfigError&) {
        default_model = false;
      }
      kernels.push_back({{"name", k.name},
                         {"help", k.help},
                         {"auto", k.in_auto},
                         {"fused", k.in_fused},
                         {"default_model", default_model},
                         {"tests", k.tests}});
    }
    json kinds = json::array();
    for (const auto& k : attention_kinds()) kinds.push_back(kind_json(k));
    json sweep_sections = json::array();
    for (const auto& s : sweep_file_sections()) sweep_sections.push_back(s.name);
    std::cout << json{{"kernels", kernels}, {"attention_kinds", kinds}, {"sweep_file_sections", sweep_sections}}.dump(2)
              << "\n";
    return 0;
  }
  std::cout << config_reference_markdown();
  return 0;
}

}  // namespace xsagpt::cli
