#include "config/model_config.h"

#include "config/model_section.h"
#include "util/json_read.h"
#include "util/paths.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>

namespace xsagpt {

namespace fs = std::filesystem;

namespace {

const AttentionKindInfo& kind_of(const ModelConfig& c, const std::string& where) {
  const auto* k = find_attention_kind(c.attention);
  if (!k)
    throw ConfigError(where + ".attention: expected " + attention_kind_choices() + ", got \"" + c.attention + "\"");
  return *k;
}

bool owns(const std::vector<std::string>& keys, const std::string& key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

// The kinds owning a key, as "attention=\"xsa\"" (or several joined by " or ").
std::string owners_of(const std::string& key) {
  std::string out;
  for (const auto& k : attention_kinds()) {
    bool mine = owns(k.fields, key);
    for (const auto& o : k.options) mine = mine || key == o.name;
    if (mine) out += fmt::format("{}attention=\"{}\"", out.empty() ? "" : " or ", k.name);
  }
  return out;
}

}  // namespace

bool ModelConfig::uses_step(int64_t layer) const {
  const auto* kind = find_attention_kind(attention);
  if (!kind || !kind->step) return false;
  if (xsa_layers.is_null()) return true;
  if (xsa_layers.is_string()) {  // "last N" (validated)
    int64_t n = std::stoll(xsa_layers.get<std::string>().substr(5));
    return layer >= n_layer - n;
  }
  for (const auto& l : xsa_layers)
    if (l.get<int64_t>() == layer) return true;
  return false;
}

std::string ModelConfig::kind_option(const std::string& key) const {
  if (auto it = kind_options.find(key); it != kind_options.end()) return it->second;
  if (const auto* kind = find_attention_kind(attention))
    for (const auto& o : kind->options)
      if (key == o.name) return o.choices.front();
  return "";
}

std::string ModelConfig::describe_attention() const {
  std::string out = attention;
  std::vector<int64_t> layers;
  for (int64_t l = 0; l < n_layer; ++l)
    if (uses_step(l)) layers.push_back(l);
  if (!layers.empty() && static_cast<int64_t>(layers.size()) < n_layer)
    out += fmt::format(" in layer{} {}", layers.size() > 1 ? "s" : "", fmt::join(layers, ","));
  if (xsa_gate != XsaGate::kOff) out += fmt::format(", gated (starts as {})", name(xsa_gate));
  for (const auto& [k, v] : kind_options) out += fmt::format(", {}={}", k, v);
  if (n_sink > 0) out += fmt::format(", {} sink{}", n_sink, n_sink > 1 ? "s" : "");
  return out;
}

std::string ModelConfig::variant() const {
  std::string out = attention;
  if (!xsa_layers.is_null())
    out += " layers=" + (xsa_layers.is_string() ? xsa_layers.get<std::string>() : xsa_layers.dump());
  if (xsa_gate != XsaGate::kOff) out += fmt::format(" gate={}", name(xsa_gate));
  for (const auto& [k, v] : kind_options) out += fmt::format(" {}={}", k, v);
  if (n_sink > 0) out += fmt::format(" sinks={}", n_sink);
  return out;
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
  if (head_dim % 2 != 0)
    throw ConfigError(where + ".head_dim: RoPE rotates pairs, so it must be even, got " + std::to_string(head_dim));
  if (dropout < 0 || dropout >= 1)
    throw ConfigError(where + ".dropout: expected a probability in [0, 1), got " + json(dropout).dump());
  const std::string xk = where + ".xsa_layers";
  if (xsa_layers.is_string()) {
    const auto s = xsa_layers.get<std::string>();
    bool ok = s.rfind("last ", 0) == 0 && s.size() > 5 && s.find_first_not_of("0123456789", 5) == std::string::npos;
    if (!ok) throw ConfigError(xk + ": expected \"last N\", a list of layer indices or null, got \"" + s + "\"");
    auto n = std::stoll(s.substr(5));
    if (n < 1 || n > n_layer)
      throw ConfigError(xk + ": \"last N\" needs 1 <= N <= n_layer (" + std::to_string(n_layer) + ")");
  } else if (xsa_layers.is_array()) {
    for (const auto& l : xsa_layers) {
      if (!l.is_number_integer() || l.get<int64_t>() < 0 || l.get<int64_t>() >= n_layer)
        throw ConfigError(xk + ": layer indices must be integers in [0, " + std::to_string(n_layer) + "), got " +
                          l.dump());
    }
  } else if (!xsa_layers.is_null()) {
    throw ConfigError(xk + ": expected null, a list of layer indices or \"last N\", got " + xsa_layers.dump());
  }
  if (head_init != "zero" && head_init != "normal" && head_init != "zero_norm" && head_init != "scaled")
    throw ConfigError(where + ".head_init: expected \"normal\", \"zero\", \"zero_norm\" or \"scaled\", got \"" +
                      head_init + "\"");
  if (tie_embeddings && head_init == "zero")
    throw ConfigError(where +
                      ".head_init: \"zero\" needs tie_embeddings=false (a zero shared matrix would also "
                      "zero the token embedding); use \"zero_norm\" or \"scaled\" to start a tied head near ln(vocab)");
  if (!tie_embeddings && head_init == "scaled")
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
  // A key a kind owns, set away from its default on a model of another kind, is refused:
  // the model would silently ignore it. The kinds' table says who owns what.
  const auto& kind = kind_of(*this, where);
  const json mine = schema::write(*this), defaults = schema::write(ModelConfig{});
  for (const auto& other : attention_kinds())
    for (const auto& key : other.fields)
      if (!owns(kind.fields, key) && mine.at(key) != defaults.at(key))
        throw ConfigError(fmt::format("{}.{}: a key of {}, so it needs {} (attention is \"{}\")", where, key,
                                      owners_of(key), owners_of(key), attention));
  for (const auto& [key, value] : kind_options) {
    const auto o = std::find_if(kind.options.begin(), kind.options.end(), [&](const auto& x) { return key == x.name; });
    if (o == kind.options.end())
      throw ConfigError(fmt::format("{}.{}: a key of {}, so it needs {} (attention is \"{}\")", where, key,
                                    owners_of(key), owners_of(key), attention));
    if (!owns(o->choices, value))
      throw ConfigError(
          fmt::format("{}.{}: expected one of \"{}\", got \"{}\"", where, key, fmt::join(o->choices, "\", \""), value));
  }
}

void read_model_section(const json& j, ModelConfig& c, const std::string& where) {
  // The kinds' own options are read here, the fields by the schema; a key neither
  // knows is the schema's "unknown key" error, which lists the fields.
  json fields = j;
  if (j.is_object())
    for (const auto& kind : attention_kinds())
      for (const auto& o : kind.options)
        if (auto it = j.find(o.name); it != j.end()) {
          if (!it->is_string())
            throw ConfigError(fmt::format("{}.{}: expected a string, got {}", where, o.name, it->dump()));
          c.kind_options[o.name] = it->get<std::string>();
          fields.erase(o.name);
        }
  schema::read(fields, c, where);
}

ModelConfig model_config_from_json(const json& j, const std::string& where) {
  ModelConfig c;
  read_model_section(j, c, where);
  c.validate(where);
  return c;
}

json to_json(const ModelConfig& c) {
  json j = schema::write(c);
  for (const auto& [k, v] : c.kind_options) j[k] = v;
  return j;
}

json read_json_file(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw ConfigError(path.string() + ": is a directory, expected a JSON file");
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
