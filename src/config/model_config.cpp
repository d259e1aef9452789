#include "config/model_config.h"

#include "config/model_section.h"
#include "util/json_read.h"
#include "util/paths.h"
#include "util/regular_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>

namespace xsagpt {

namespace fs = std::filesystem;

const AttentionSpec& ModelConfig::spec() const {
  if (!spec_.resolved_for(attention, n_layer, n_sink))
    spec_ = AttentionSpec::resolve(attention, spec_.resolved() ? spec_.written() : json::object(), n_layer, n_sink);
  return spec_;
}

void ModelConfig::set_attention(const std::string& kind, const json& keys, const std::string& where) {
  spec_ = AttentionSpec::resolve(kind, keys, n_layer, n_sink, where);
  attention = kind;
}

double ModelConfig::width_multiplier() const {
  return mup() ? static_cast<double>(d_model) / static_cast<double>(mup_base_width) : 1.0;
}

double ModelConfig::attention_scale() const {
  const double d = static_cast<double>(head_dim);
  if (!mup()) return 1.0 / std::sqrt(d);
  const double base = mup_base_head_dim > 0 ? static_cast<double>(mup_base_head_dim) : d;
  return std::sqrt(base) / d;
}

void ModelConfig::validate(const std::string& where) const {
  auto positive = [&](const char* key, double value) {
    if (!(value > 0)) throw ConfigError(where + "." + key + ": must be > 0, got " + json(value).dump());
  };
  positive("vocab_size", vocab_size);
  positive("block_size", block_size);
  positive("n_layer", n_layer);
  positive("d_model", d_model);
  positive("n_head", n_head);
  positive("head_dim", head_dim);
  positive("mlp_ratio", mlp_ratio);
  positive("rope_theta", rope_theta);
  positive("norm_eps", norm_eps);
  positive("xsa_eps", xsa_eps);
  positive("mup_base_width", mup_base_width);
  if (mup_base_head_dim < 0)
    throw ConfigError(where + ".mup_base_head_dim: must be >= 0 (0: the model's own head_dim), got " +
                      std::to_string(mup_base_head_dim));
  if (head_dim % 2 != 0)
    throw ConfigError(where + ".head_dim: RoPE rotates pairs, so it must be even, got " + std::to_string(head_dim));
  if (dropout < 0 || dropout >= 1)
    throw ConfigError(where + ".dropout: expected a probability in [0, 1), got " + json(dropout).dump());
  if (tie_embeddings && head_init == HeadInit::kZero)
    throw ConfigError(where +
                      ".head_init: \"zero\" needs tie_embeddings=false (a zero shared matrix would also "
                      "zero the token embedding); use \"zero_norm\" or \"scaled\" to start a tied head near ln(vocab)");
  if (!tie_embeddings && head_init == HeadInit::kScaled)
    throw ConfigError(where + ".head_init: \"scaled\" shrinks the shared embedding and needs tie_embeddings=true");
  if (n_sink < 0) throw ConfigError(where + ".n_sink: must be >= 0, got " + std::to_string(n_sink));
  // Every query attends to every sink: more sinks than positions is a typo, and a
  // large count makes each step's attention n_sink times wider than the sequence.
  if (n_sink > block_size)
    throw ConfigError(fmt::format("{}.n_sink: {} sinks is more than block_size ({}); use a few (e.g. 1-4)", where,
                                  n_sink, block_size));
  // Parameter counts, FLOPs and tensor sizes are int64 products of these sizes; a
  // model whose count does not fit (about 9.2e18) is refused rather than wrapped
  // around into negative numbers. The bound is computed in double, generously.
  const double d = static_cast<double>(d_model), inner = static_cast<double>(n_head) * static_cast<double>(head_dim);
  const double hidden = mlp_ratio * d;
  const double per_layer = 4 * d * inner + 2 * d * hidden + 3 * inner + hidden + 6 * d + static_cast<double>(n_head);
  const double bound = static_cast<double>(n_layer) * per_layer + 2 * static_cast<double>(vocab_size) * d +
                       (static_cast<double>(n_sink) + 4) * d +
                       static_cast<double>(block_size) * static_cast<double>(head_dim);
  if (!(bound < 0x1p62))
    throw ConfigError(
        fmt::format("{}: n_layer {}, d_model {}, n_head {} x head_dim {}, mlp_ratio {}, vocab_size {} "
                    "give about {:.3g} parameters, more than a 64-bit count can hold; sizes are "
                    "wrong (a typo?)",
                    where, n_layer, d_model, n_head, head_dim, mlp_ratio, vocab_size, bound));
  // The kind and its keys, checked as reading checks them, under this `where`: a config
  // changed in code since it was read is held to the same rules.
  AttentionSpec::resolve(attention, spec_.resolved() ? spec_.written() : json::object(), n_layer, n_sink, where);
}

void read_model_section(const json& j, ModelConfig& c, const std::string& where) {
  // The kinds' keys are read by the spec, the fields by the schema; a key neither
  // knows is the schema's "unknown key" error, which lists the fields.
  json fields = j, keys = json::object();
  if (j.is_object())
    for (const auto& [k, v] : j.items())
      if (find_kind_key(k)) {
        keys[k] = v;
        fields.erase(k);
      }
  schema::read(fields, c, where);
  c.set_attention(c.attention, keys, where);
}

ModelConfig model_config_from_json(const json& j, const std::string& where) {
  ModelConfig c;
  read_model_section(j, c, where);
  c.validate(where);
  return c;
}

json to_json(const ModelConfig& c) {
  json j = schema::write(c);
  j.update(c.spec().written());
  return j;
}

json read_json_file(const fs::path& path) {
  if (const auto what = not_a_regular_file(path); !what.empty())
    throw ConfigError(path.string() + ": is " + what + ", expected a JSON file");
  std::ifstream in(path);
  if (!in) throw ConfigError(path.string() + ": cannot open: " + std::strerror(errno));
  // JSON objects keep the last of two equal keys; a config with "lr" twice would
  // silently train with the second, so a repeated key is an error naming it.
  std::vector<std::pair<std::string, std::set<std::string>>> open;  // per open object: its name, its keys
  std::string last_key = "(top level)";
  const json::parser_callback_t no_duplicates = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open.push_back({open.empty() ? std::string("(top level)") : last_key, {}});
    } else if (event == json::parse_event_t::object_end) {
      if (!open.empty()) open.pop_back();
    } else if (event == json::parse_event_t::key && !open.empty()) {
      last_key = parsed.get<std::string>();
      if (!open.back().second.insert(last_key).second)
        throw ConfigError(fmt::format(
            "{}: key \"{}\" appears twice in {}; JSON would keep only the last one, so "
            "remove the one you do not mean",
            path.string(), last_key, open.size() == 1 ? "the top-level object" : "\"" + open.back().first + "\""));
    }
    return true;
  };
  try {
    return parse_json(in, path.string(), no_duplicates, /*ignore_comments=*/true);
  } catch (const ConfigError&) {
    throw;
  } catch (const json::parse_error& e) {
    // A literal NaN or Infinity is named as such (util/json_read.h): the rule, not the parser's syntax error.
    std::ifstream again(path);
    const std::string text{std::istreambuf_iterator<char>(again), std::istreambuf_iterator<char>()};
    if (const auto line = nonfinite_literal_line(text)) throw ConfigError(nonfinite_literal_message(path.string(), *line));
    throw ConfigError(path.string() + ": not valid JSON (" + e.what() + ")");
  } catch (const std::exception& e) {  // a read error of the stream itself
    throw ConfigError(path.string() + ": cannot read: " + e.what());
  }
}

fs::path resolve_model_file(const std::string& ref, const fs::path& relative_to) {
  std::vector<fs::path> candidates{ref};
  if (!relative_to.empty()) candidates.push_back(relative_to / ref);
  const std::string file = ref.ends_with(".json") ? ref : ref + ".json";
  candidates.push_back(fs::path("configs/model") / file);
  if (auto root = project_root()) candidates.push_back(*root / "configs/model" / file);
  for (const auto& c : candidates)
    if (fs::is_regular_file(c)) return c;
  throw ConfigError("model config '" + ref + "': no such file (looked for it as a path and in configs/model/)");
}

ModelConfig load_model_config(const std::string& ref) {
  auto path = resolve_model_file(ref);
  return model_config_from_json(read_json_file(path), path.string());
}

}  // namespace xsagpt
