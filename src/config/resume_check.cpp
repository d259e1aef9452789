// The config a resumed run may change (see resume_check.h).
#include "config/resume_check.h"

#include "config/config_diff.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <vector>

namespace xsagpt {

namespace {

// The keys that split an optimizer step, as the checkpoint's run read them.
RunConfig saved_split(const json& saved, const std::string& file) {
  RunConfig c;
  const json t = saved_meaning(saved).value("train", json::object());
  try {
    c.train.micro_batch = t.value("micro_batch", c.train.micro_batch);
    c.train.seq_len = t.value("seq_len", c.train.seq_len);
    c.train.batch_tokens = t.value("batch_tokens", c.train.batch_tokens);
  } catch (const json::exception&) {
    throw ConfigError(file + ": the checkpoint's train.micro_batch, seq_len and batch_tokens must be integers");
  }
  if (c.train.micro_batch < 1 || c.train.seq_len < 1 || c.train.batch_tokens < 0)
    throw ConfigError(fmt::format("{}: the checkpoint's train section splits no step (micro_batch {}, seq_len {})",
                                  file, c.train.micro_batch, c.train.seq_len));
  return c;
}

std::string ranks_text(int64_t n) { return fmt::format("{} rank{}", n, n == 1 ? "" : "s"); }

// "micro_batch 4 x seq_len 32 x 2 accumulation x 3 ranks"
std::string split_text(const RunConfig& c, int64_t ranks) {
  return fmt::format("micro_batch {} x seq_len {} x {} accumulation x {}", c.train.micro_batch, c.train.seq_len,
                     c.accumulation_steps(ranks), ranks_text(ranks));
}

// What keeps `tokens` per step on `ranks` for a config like `cfg`.
std::string keeping(const RunConfig& cfg, int64_t tokens, int64_t ranks) {
  const int64_t T = cfg.train.seq_len, sequences = tokens / T;
  if (tokens % T != 0 || sequences % ranks != 0) {
    std::vector<int64_t> fit;  // the rank counts that share the step's sequences equally
    for (int64_t n = 1; n <= sequences && fit.size() < 12; ++n)
      if (sequences % n == 0) fit.push_back(n);
    return fmt::format("its {} sequences of {} tokens cannot be shared equally by {}; resume on {}{} ranks", sequences,
                       T, ranks_text(ranks), fmt::join(fit, ", "), fit.size() == 12 ? ", ..." : "");
  }
  RunConfig keep = cfg;
  keep.train.batch_tokens = tokens;
  const int64_t per_rank = sequences / ranks;
  while (per_rank % keep.train.micro_batch != 0) --keep.train.micro_batch;  // the largest that divides, at most as many
  return fmt::format("set train.batch_tokens={}{} ({})", tokens,
                     keep.train.micro_batch == cfg.train.micro_batch
                         ? ""
                         : fmt::format(" and train.micro_batch={}", keep.train.micro_batch),
                     split_text(keep, ranks));
}

}  // namespace

void check_resume_compatible(const RunConfig& cfg, const json& saved_config, const std::string& file) {
  if (!saved_config.is_object() || !saved_config.contains("model") || !saved_config["model"].is_object())
    throw ConfigError(file + ": checkpoint has no model config");
  // Both read for what they mean: keys newer than the checkpoint take their defaults,
  // and a kind's key left out is its default, so spelling a default out is no change.
  const json saved = saved_meaning(saved_config), now = saved_meaning(to_json(cfg));
  // A value as its config spelled it ("last 2"), else the default that stands in.
  auto shown = [](const json& raw, const std::string& k, const json& meaning) {
    return (raw.contains(k) ? raw[k] : meaning).dump();
  };
  json keys = now["model"];
  keys.update(saved["model"]);  // every key either side has, in order
  // The parametrization first: under "sp" the mup_* keys read as their defaults, so a
  // change of parametrization would otherwise be named as a change of mup_base_width.
  std::vector<std::string> order{"parametrization"};
  for (const auto& [k, _] : keys.items())
    if (k != order.front()) order.push_back(k);
  for (const auto& k : order) {
    const json old = saved["model"].value(k, json()), v = now["model"].value(k, json());
    if (old != v)
      throw ConfigError(
          fmt::format("{}: model.{} is {} in the checkpoint but {} in this config; a resumed run "
                      "must use the same model",
                      file, k, shown(saved_config["model"], k, old), shown(to_json(cfg)["model"], k, v)));
  }
  for (const char* section : {"train", "data"}) {
    if (!saved.contains(section) || !saved[section].is_object()) continue;
    for (const auto& [k, v] : now[section].items()) {
      const auto old = saved[section].value(k, json());
      if (old != v)
        spdlog::warn("{}.{}: {} in the checkpoint, {} now; using {}", section, k, old.dump(), v.dump(), v.dump());
    }
  }
}

std::string check_resume_ranks(const RunConfig& cfg, const json& saved, int64_t saved_ranks, int64_t ranks,
                               const std::string& file) {
  if (saved_ranks == ranks) return "";
  const RunConfig then = saved_split(saved, file);
  if (then.train.seq_len != cfg.train.seq_len) return "";  // the loader refuses it, naming the key
  const int64_t tokens = then.tokens_per_step(saved_ranks), now = cfg.tokens_per_step(ranks);
  if (tokens != now)
    throw ConfigError(fmt::format(
        "{}: saved by {}, whose optimizer steps were {} tokens ({}), but this config makes them {} tokens on {} ({}). "
        "A resume on another number of ranks keeps the tokens of a step, so that each step trains on the sequences "
        "the uninterrupted run's would: {}",
        file, ranks_text(saved_ranks), tokens, split_text(then, saved_ranks), now, ranks_text(ranks),
        split_text(cfg, ranks), keeping(cfg, tokens, ranks)));
  return fmt::format(
      "ranks: {} was saved by {}, this run has {}: each optimizer step still trains on {} tokens, the sequences the "
      "uninterrupted run's would ({} then, {} now), but its losses follow that run's to floating-point tolerance, "
      "not bit for bit: the gradient is summed over micro-batches and ranks in another order",
      file, ranks_text(saved_ranks), ranks_text(ranks), tokens, split_text(then, saved_ranks), split_text(cfg, ranks));
}

}  // namespace xsagpt
