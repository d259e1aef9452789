#include "config/run_config.h"

#include "config/kernel_fit.h"
#include "config/model_section.h"
#include "util/device.h"
#include "util/json_read.h"
#include "util/utf8.h"

#include <fmt/format.h>

#include <set>

namespace xsagpt {

namespace fs = std::filesystem;

int64_t RunConfig::accumulation_steps(int64_t world_size) const {
  const auto per = tokens_per_micro_step(world_size);
  return train.batch_tokens == 0 ? 1 : train.batch_tokens / per;
}

void RunConfig::validate(int64_t world_size) const {
  model.validate("model");
  const auto& t = train;
  auto fail = [](const std::string& key, const std::string& msg) { throw ConfigError(key + ": " + msg); };
  if (!(t.lr > 0)) fail("train.lr", fmt::format("must be > 0, got {}", t.lr));
  if (t.min_lr_ratio < 0 || t.min_lr_ratio > 1)
    fail("train.min_lr_ratio", fmt::format("must be in [0, 1], got {}", t.min_lr_ratio));
  if (t.warmup_steps < 0) fail("train.warmup_steps", "must be >= 0");
  if (t.max_steps < 1) fail("train.max_steps", "must be >= 1");
  if (!(t.decay_fraction >= 0 && t.decay_fraction <= 1))
    fail("train.decay_fraction", fmt::format("must be in [0, 1], got {}", t.decay_fraction));
  if (t.schedule == Schedule::kWsd && t.decay_start() < t.warmup_steps)
    fail("train.decay_fraction",
         fmt::format("{} of {} steps is a decay of {} steps from step {}, before the warmup's {} steps end; "
                     "choose a smaller decay_fraction or fewer warmup_steps",
                     t.decay_fraction, t.max_steps, t.max_steps - t.decay_start(), t.decay_start(), t.warmup_steps));
  if (t.seq_len < 1 || t.seq_len > model.block_size)
    fail("train.seq_len", fmt::format("must be in 1..{} (model.block_size), got {}", model.block_size, t.seq_len));
  if (t.micro_batch < 1) fail("train.micro_batch", "must be >= 1");
  // Token counts are int64 products of these sizes; a product that does not fit (about
  // 9.2e18) is refused by name rather than wrapped around into a negative number.
  auto too_many = [](double tokens) { return !(tokens < 0x1p62); };
  if (too_many(static_cast<double>(t.micro_batch) * static_cast<double>(t.seq_len) * static_cast<double>(world_size)))
    fail("train.micro_batch",
         fmt::format("{} sequences of {} tokens on {} rank(s) is more tokens than a 64-bit count holds", t.micro_batch,
                     t.seq_len, world_size));
  const auto per = tokens_per_micro_step(world_size);
  if (t.batch_tokens < 0 || t.batch_tokens % per != 0)
    fail("train.batch_tokens",
         fmt::format("must be 0 or a multiple of micro_batch*seq_len*world_size = {}*{}*{} = {}, got {}", t.micro_batch,
                     t.seq_len, world_size, per, t.batch_tokens));
  if (too_many(static_cast<double>(t.max_steps) * static_cast<double>(t.batch_tokens > 0 ? t.batch_tokens : per)))
    fail("train.max_steps", fmt::format("{} steps of {} tokens is more tokens than a 64-bit count holds", t.max_steps,
                                        t.batch_tokens > 0 ? t.batch_tokens : per));
  if (t.weight_decay < 0) fail("train.weight_decay", "must be >= 0");
  if (t.beta1 < 0 || t.beta1 >= 1) fail("train.beta1", "must be in [0, 1)");
  if (t.beta2 < 0 || t.beta2 >= 1) fail("train.beta2", "must be in [0, 1)");
  if (!(t.eps > 0)) fail("train.eps", "must be > 0");
  if (!(t.muon_lr > 0)) fail("train.muon_lr", fmt::format("must be > 0, got {}", t.muon_lr));
  if (t.muon_momentum < 0 || t.muon_momentum >= 1)
    fail("train.muon_momentum", fmt::format("must be in [0, 1), got {}", t.muon_momentum));
  if (t.muon_ns_steps < 1 || t.muon_ns_steps > 99)
    fail("train.muon_ns_steps", fmt::format("must be in 1..99, got {}", t.muon_ns_steps));
  if (t.muon_weight_decay < 0) fail("train.muon_weight_decay", "must be >= 0");
  // Sharding Muon would split whole matrices over ranks, each orthogonalising its
  // share and broadcasting it; refused for now rather than silently replicated
  // (docs/training.md#muon says why).
  if (t.shard_optimizer && !shardable(t.optimizer))
    fail("train.shard_optimizer",
         "not supported with train.optimizer=muon (Muon's momentum is kept on every rank); set "
         "train.shard_optimizer=false, or train.optimizer=adamw to shard AdamW's state");
  check_optimizer_fits_model(t.optimizer, model, "train.optimizer");
  if (t.grad_clip < 0) fail("train.grad_clip", "must be >= 0 (0 disables clipping)");
  if (t.log_interval < 1) fail("train.log_interval", "must be >= 1");
  if (t.eval_interval < 0) fail("train.eval_interval", "must be >= 0");
  if (t.eval_tokens < 0) fail("train.eval_tokens", "must be >= 0");
  if (t.eval_similarity_sequences < 0) fail("train.eval_similarity_sequences", "must be >= 0 (0: off)");
  if (t.eval_similarity_positions < 2)
    fail("train.eval_similarity_positions", "must be >= 2 (the bias needs two tokens to attend over)");
  // The bias is measured on the first min(positions, seq_len) tokens: a run of one-token
  // sequences would pass here and die at its first evaluation, after training.
  if (t.eval_similarity_sequences > 0 && t.seq_len < 2)
    fail("train.seq_len",
         fmt::format("{} token per sequence leaves the similarity bias (train.eval_similarity_sequences = {}) no "
                     "other token to attend over; it needs >= 2: set train.eval_similarity_sequences=0 to train "
                     "on one-token sequences",
                     t.seq_len, t.eval_similarity_sequences));
  if (t.eval_tokens > 0 && t.eval_tokens < per)
    fail("train.eval_tokens",
         fmt::format("{} tokens is less than one validation batch of micro_batch*seq_len*world_size = {}*{}*{} = {} "
                     "tokens (0: all val sequences)",
                     t.eval_tokens, t.micro_batch, t.seq_len, world_size, per));
  if (t.ckpt_interval < 0) fail("train.ckpt_interval", "must be >= 0");
  if (t.keep_checkpoints < 1) fail("train.keep_checkpoints", "must be >= 1");
  for (const auto step : t.ckpt_steps)
    if (step < 1 || step > t.max_steps)
      fail("train.ckpt_steps", fmt::format("{} is not a step of this run (1 to max_steps = {})", step, t.max_steps));
  parse_precision(t.precision, /*cuda=*/false);
  check_device_spec(t.device, "train.device");
  check_cpu_threads(t.threads, "train.threads");
  if (t.loss_chunk < 0) fail("train.loss_chunk", "must be >= 0 (0: no chunking)");
  check_kernels_fit_model(parse_kernels(t.kernels, /*cuda=*/false), model);
  if (data.train.empty()) fail("data.train", "required: glob pattern of training shards");
  if (data.val.empty()) fail("data.val", "required: glob pattern of validation shards");
  if (out_dir.empty()) fail("out_dir", "must not be empty");
  for (const auto& [key, path] : {std::pair{"out_dir", &out_dir}, {"data.train", &data.train}, {"data.val", &data.val}})
    if (const auto bad = utf8::first_invalid(*path); bad != path->size()) fail(key, not_utf8(*path, bad));
}

std::string not_utf8(const std::string& path, size_t at) {
  return fmt::format(
      "\"{}\" is not valid UTF-8 (byte 0x{:02x} at offset {}); a run records its paths in config.json and its "
      "checkpoints, which hold UTF-8 text: choose a name in UTF-8",
      utf8::escape_invalid(path), static_cast<unsigned char>(path[at]), at);
}

void check_optimizer_fits_model(Optimizer optimizer, const ModelConfig& model, const std::string& key) {
  // Muon's orthogonalised update has a width scaling of its own, which μP's AdamW
  // rules do not give it and this code does not implement.
  if (optimizer == Optimizer::kMuon && model.mup())
    throw ConfigError(key +
                      ": muon with model.parametrization=\"mup\" is not supported: μP's rates here are AdamW's; "
                      "use train.optimizer=adamw, or model.parametrization=\"sp\" to train with Muon");
}

Runtime RunConfig::runtime(bool cuda) const { return runtime_of(train, cuda); }

Runtime runtime_of(const TrainConfig& train, bool cuda) {
  Runtime rt;
  rt.kernels = parse_kernels(train.kernels, cuda);
  rt.recompute = train.activation_checkpointing;
  rt.loss_chunk = train.loss_chunk;
  rt.bf16 = parse_precision(train.precision, cuda);
  rt.tf32 = cuda;  // float32 matmuls in TF32 on CUDA, as every run has trained
  return rt;
}

json to_json(const RunConfig& c) {
  return {{"model", to_json(c.model)},
          {"data", schema::write(c.data)},
          {"train", schema::write(c.train)},
          {"out_dir", c.out_dir},
          {"variant", c.model.spec().name()}};
}

RunConfig run_config_from_json(const json& j, const std::string& where) {
  if (!j.is_object()) schema::bad(where, "a JSON object with model, data, train sections", j);
  RunConfig c;
  for (const auto& [k, v] : j.items()) {
    if (k == "model")
      read_model_section(v, c.model, where + ": model");
    else if (k == "data")
      schema::read(v, c.data, where + ": data");
    else if (k == "train")
      schema::read(v, c.train, where + ": train");
    else if (k == "out_dir")
      schema::read_value(v, c.out_dir, where + ": out_dir");
    else if (k == "variant")
      continue;  // written from model (to_json), so a saved config reads back; nothing to set
    else
      throw ConfigError(where + ": unknown section '" + k + "' (known: model, data, train, out_dir)");
  }
  return c;
}

namespace {

// `model` may be a reference ("tiny", a path) or an object with "base" plus overrides.
json expand_model_section(const json& m, const fs::path& dir, const std::string& where) {
  auto load = [&](const json& ref) {
    if (!ref.is_string()) schema::bad(where + ": model.base", "a model config name or path", ref);
    auto file = resolve_model_file(ref.get<std::string>(), dir);
    auto j = read_json_file(file);
    if (!j.is_object()) schema::bad(file.string(), "a JSON object", j);
    return j;
  };
  if (m.is_string()) return load(m);
  if (m.is_object() && m.contains("base")) {
    json merged = load(m["base"]);
    for (const auto& [k, v] : m.items())
      if (k != "base") merged[k] = v;
    return merged;
  }
  return m;
}

}  // namespace

void apply_overrides(json& raw, const std::vector<std::string>& overrides) {
  for (const auto& o : overrides) {
    const auto eq = o.find('=');
    const auto key = o.substr(0, eq);
    const auto dot = key.find('.');
    if (eq == std::string::npos || eq == 0)
      throw ConfigError("--set " + o + ": expected section.key=value (e.g. train.lr=3e-4)");
    const auto text = o.substr(eq + 1);
    json value;
    try {
      value = parse_json(text, "--set " + key);
    } catch (const json::parse_error&) {
      value = text;  // bare strings: model.attention=xsa
    }
    if (dot == std::string::npos) {
      if (key != "out_dir") throw ConfigError("--set " + o + ": unknown key '" + key + "' (use section.key)");
      raw[key] = value;
      continue;
    }
    const auto section = key.substr(0, dot), name = key.substr(dot + 1);
    if (section != "model" && section != "data" && section != "train")
      throw ConfigError("--set " + o + ": unknown section '" + section + "' (known: model, data, train)");
    raw[section][name] = value;
  }
}

void check_kind_overrides(const ModelConfig& m, const std::vector<std::string>& overrides, const std::string& where) {
  for (const auto& o : overrides) {
    const auto key = o.substr(0, o.find('='));
    if (key.starts_with("model.") && find_kind_key(key.substr(6)))
      refuse_foreign_kind_key(m.spec().kind(), key.substr(6), json(), /*from_file=*/false, where);
  }
}

RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides, int64_t world_size) {
  json raw = read_json_file(path);
  if (!raw.is_object()) schema::bad(path, "a JSON object", raw);
  // A model reference is a base with no overrides yet; --set then applies to it as to
  // the file's own overrides (model.base included), and the base is read last.
  if (raw.contains("model") && raw["model"].is_string()) raw["model"] = json{{"base", raw["model"]}};
  apply_overrides(raw, overrides);
  if (raw.contains("model")) raw["model"] = expand_model_section(raw["model"], fs::path(path).parent_path(), path);
  const std::string where = overrides.empty() ? path : path + " (with --set)";
  auto cfg = run_config_from_json(raw, where);
  check_kind_overrides(cfg.model, overrides, where + ": model");
  cfg.validate(world_size);
  return cfg;
}

namespace {

// The attention kinds' keys, a row each (a key several kinds own, once), with the
// kinds that read it: they follow model.attention.
std::string kind_key_rows() {
  std::string rows;
  std::set<std::string> seen;
  for (const auto& kind : attention_kinds())
    for (const auto& k : kind.keys)
      if (seen.insert(k.name).second)
        rows += fmt::format("| `model.{}` | `{}` | {} only: {} |\n", k.name, k.default_value.dump(),
                            kind_key_owners(k.name), k.help);
  return rows;
}

}  // namespace

std::string config_reference_markdown() {
  std::string model = schema::reference_rows<ModelConfig>("model");
  const auto attention = model.find("| `model.attention` |");
  const auto after = model.find('\n', attention) + 1;
  model.insert(after, kind_key_rows());
  return "| key | default | meaning |\n|---|---|---|\n" + model + schema::reference_rows<DataConfig>("data") +
         schema::reference_rows<TrainConfig>("train") +
         fmt::format("| `out_dir` | `{}` | run directory: config.json, metrics.jsonl, checkpoints/ |\n",
                     json(RunConfig{}.out_dir).dump());
}

}  // namespace xsagpt
