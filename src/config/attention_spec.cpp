// The attention resolved from a model section (see attention_spec.h).
#include "config/attention_spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace xsagpt {

namespace {

std::string quoted_choices(const std::vector<std::string>& choices) {
  std::string out;
  for (size_t i = 0; i < choices.size(); ++i)
    out += std::string(i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + "\"" + choices[i] + "\"";
  return out;
}

// "last N" with N a count of layers; nullopt for any other string.
std::optional<int64_t> last_count(const std::string& s) {
  if (s.rfind("last ", 0) != 0 || s.size() == 5 || s.size() > 5 + 18) return std::nullopt;
  if (s.find_first_not_of("0123456789", 5) != std::string::npos) return std::nullopt;
  return std::stoll(s.substr(5));
}

StepLayers read_step_layers(const json& v, const std::string& key, int64_t n_layer) {
  StepLayers out;
  if (v.is_string()) {
    const auto s = v.get<std::string>();
    out.last = last_count(s);
    if (!out.last) throw ConfigError(key + ": expected \"last N\", a list of layer indices or null, got \"" + s + "\"");
    if (*out.last < 1 || *out.last > n_layer)
      throw ConfigError(key + ": \"last N\" needs 1 <= N <= n_layer (" + std::to_string(n_layer) + ")");
  } else if (v.is_array()) {
    out.list.emplace();
    for (const auto& l : v) {
      if (!l.is_number_integer() || l.get<int64_t>() < 0 || l.get<int64_t>() >= n_layer)
        throw ConfigError(key + ": layer indices must be integers in [0, " + std::to_string(n_layer) + "), got " +
                          l.dump());
      out.list->push_back(l.get<int64_t>());
    }
  } else if (!v.is_null()) {
    throw ConfigError(key + ": expected null, a list of layer indices or \"last N\", got " + v.dump());
  }
  return out;
}

AttentionSpec::Value read_key_value(const KindKey& k, const json& v, const std::string& key, int64_t n_layer) {
  switch (k.type) {
    case KeyType::kChoice:
      if (!v.is_string() || std::find(k.choices.begin(), k.choices.end(), v.get<std::string>()) == k.choices.end())
        schema::bad(key, quoted_choices(k.choices), v);
      return v.get<std::string>();
    case KeyType::kLayers: return read_step_layers(v, key, n_layer);
    case KeyType::kBool: {
      bool b = false;
      schema::read_value(v, b, key);
      return b;
    }
    case KeyType::kInteger: return schema::read_integer<int64_t>(v, key);
    case KeyType::kNumber: {
      double d = 0;
      schema::read_value(v, d, key);
      return d;
    }
  }
  throw ConfigError(key + ": a key of an unknown type");  // unreachable for a key of the table
}

bool kind_owns_key(const AttentionKind& kind, const std::string& key) {
  return std::any_of(kind.keys.begin(), kind.keys.end(), [&](const KindKey& k) { return key == k.name; });
}

}  // namespace

void refuse_foreign_kind_key(const AttentionKind& kind, const std::string& name, const json& value, bool from_file,
                             const std::string& where) {
  if (kind_owns_key(kind, name)) return;
  const auto* key = find_kind_key(name);
  if (!key) throw ConfigError(fmt::format("{}: {} is not a key of any attention kind", where, name));
  if (from_file && key->always_written && value == key->default_value) return;  // the saved spelling
  throw ConfigError(fmt::format("{}.{}: a key of {}, so it needs {} (attention is \"{}\"); a key of another kind is "
                                "refused whatever its value",
                                where, name, kind_key_owners(name), kind_key_owners(name), kind.name));
}

AttentionSpec AttentionSpec::resolve(const std::string& kind, const json& keys, int64_t n_layer, int64_t n_sink,
                                     const std::string& where) {
  return resolve(attention_kind(kind, where), keys, n_layer, n_sink, where);
}

AttentionSpec AttentionSpec::resolve(const AttentionKind& kind, const json& keys, int64_t n_layer, int64_t n_sink,
                                     const std::string& where) {
  AttentionSpec s;
  s.kind_ = &kind;
  s.n_layer_ = n_layer, s.n_sink_ = n_sink;
  if (!keys.is_object()) schema::bad(where, "an object of the attention kinds' keys", keys);
  // A key of another kind, by the rule of refuse_foreign_kind_key: keys here are a config's.
  for (const auto& [name, value] : keys.items()) refuse_foreign_kind_key(kind, name, value, /*from_file=*/true, where);
  for (const auto& k : kind.keys) {
    const auto it = keys.find(k.name);
    const bool set = it != keys.end();
    s.entries_.push_back({&k, read_key_value(k, set ? *it : k.default_value, where + "." + k.name, n_layer), set});
  }
  for (const auto& e : s.entries_)
    if (e.key->type == KeyType::kLayers) s.layers_ = std::get<StepLayers>(e.value);
  return s;
}

bool AttentionSpec::resolved_for(const std::string& kind, int64_t n_layer, int64_t n_sink) const {
  return kind_ && kind == kind_->name && n_layer == n_layer_ && n_sink == n_sink_;
}

bool AttentionSpec::uses_step(int64_t layer) const {
  if (!kind_->step || layer < 0 || layer >= n_layer_) return false;
  if (layers_ && layers_->last) return layer >= n_layer_ - *layers_->last;
  if (layers_ && layers_->list)
    return std::find(layers_->list->begin(), layers_->list->end(), layer) != layers_->list->end();
  return true;
}

std::vector<std::pair<int64_t, int64_t>> AttentionSpec::step_runs() const {
  if (!kind_->step || n_layer_ <= 0) return {};
  if (layers_ && layers_->last) return {{n_layer_ - *layers_->last, n_layer_ - 1}};
  if (!layers_ || !layers_->list) return {{0, n_layer_ - 1}};
  auto layers = *layers_->list;
  std::sort(layers.begin(), layers.end());
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (const auto l : layers)
    if (runs.empty() || l > runs.back().second + 1)
      runs.emplace_back(l, l);
    else
      runs.back().second = std::max(runs.back().second, l);
  return runs;
}

const AttentionSpec::Entry& AttentionSpec::entry(std::string_view key) const {
  for (const auto& e : entries_)
    if (key == e.key->name) return e;
  throw std::logic_error(fmt::format("attention \"{}\" has no key {}", kind_ ? kind_->name : "?", key));
}

json AttentionSpec::value_json(const Entry& e) const {
  return std::visit(
      [](const auto& v) -> json {
        if constexpr (std::is_same_v<std::decay_t<decltype(v)>, StepLayers>) {
          if (v.last) return "last " + std::to_string(*v.last);
          return v.list ? json(*v.list) : json(nullptr);
        } else {
          return v;
        }
      },
      e.value);
}

bool AttentionSpec::shown(const Entry& e) const {
  return e.key->always_written ? value_json(e) != e.key->default_value : e.set;
}

std::string AttentionSpec::name() const {
  std::string out = kind_->name;
  for (const auto& e : entries_)
    if (shown(e)) {
      const json v = value_json(e);
      out += fmt::format(" {}={}", e.key->label, v.is_string() ? v.get<std::string>() : v.dump());
    }
  if (n_sink_ > 0) out += fmt::format(" sinks={}", n_sink_);
  return out;
}

std::string AttentionSpec::describe() const {
  std::string out = kind_->name;
  const auto runs = step_runs();
  std::vector<int64_t> layers;
  if (runs.size() != 1 || runs[0] != std::pair<int64_t, int64_t>{0, n_layer_ - 1})
    for (const auto& [first, last] : runs)
      for (int64_t l = first; l <= last; ++l) layers.push_back(l);
  if (!layers.empty()) out += fmt::format(" in layer{} {}", layers.size() > 1 ? "s" : "", fmt::join(layers, ","));
  for (const auto& e : entries_)
    if (shown(e) && *e.key->description) {
      const json v = value_json(e);
      out += fmt::format(fmt::runtime(e.key->description), v.is_string() ? v.get<std::string>() : v.dump());
    }
  if (n_sink_ > 0) out += fmt::format(", {} sink{}", n_sink_, n_sink_ > 1 ? "s" : "");
  return out;
}

json AttentionSpec::written() const {
  json out = json::object();
  for (const auto& kind : attention_kinds())
    for (const auto& k : kind.keys)
      if (k.always_written) out[k.name] = k.default_value;
  for (const auto& e : entries_)
    if (e.key->always_written || e.set) out[e.key->name] = value_json(e);
  return out;
}

json AttentionSpec::meaning() const {
  json out = written();
  for (const auto& e : entries_) {
    out[e.key->name] = value_json(e);
    if (e.key->type != KeyType::kLayers) continue;
    const auto runs = step_runs();
    const bool every = runs.size() == 1 && runs[0] == std::pair<int64_t, int64_t>{0, n_layer_ - 1};
    out[e.key->name] = every ? json(nullptr) : json(runs);
  }
  return out;
}

}  // namespace xsagpt
