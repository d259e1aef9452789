// The attention of a model as one value: model.attention's kind (its row of
// config/attention_kinds.h), the kind's keys as typed values, the layers that take
// its step and the sinks. Resolved once when a model section is read, and checked
// then: a key of another kind, a value of the wrong type or a layer out of range is
// a ConfigError naming the key. What the model, the counts and the tools ask of a
// kind, they ask of this (ModelConfig::spec()) rather than of the JSON.
//
// Its two names: name() is the model's variant name, the keys as a config wrote
// them ("xsa layers=last 3 gate=sa sinks=2", what config.json records as "variant"
// and what an arm of a comparison is called when nothing else names it);
// describe() is the same in words for logs ("xsa in layers 9,10,11, gated (starts
// as sa), 2 sinks"). meaning() is what the keys mean, however they are spelled: a key
// left out and the same key at its default are one config (config/config_diff.h).
// Configuration only: no torch here.
#pragma once

#include "config/attention_kinds.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace xsagpt {

// A kLayers key's value: null (every layer), "last N", or a list of indices, as written.
struct StepLayers {
  std::optional<int64_t> last;  // "last N"
  std::optional<std::vector<int64_t>> list;
};

class AttentionSpec {
 public:
  using Value = std::variant<std::string, StepLayers, bool, int64_t, double>;  // a choice's name, or the value

  AttentionSpec() = default;  // not resolved yet (resolved() is false)

  // The kind `kind` with its keys as a model section spells them (`keys` holds only
  // keys of kinds, possibly of other kinds at their defaults; a key left out takes
  // its default), on a model of `n_layer` layers and `n_sink` sinks. ConfigError
  // naming `where`.key for anything its table refuses.
  static AttentionSpec resolve(const std::string& kind, const json& keys, int64_t n_layer, int64_t n_sink,
                               const std::string& where = "model");
  // The same for a kind's row itself (the table's, or one a test makes up).
  static AttentionSpec resolve(const AttentionKind& kind, const json& keys, int64_t n_layer, int64_t n_sink,
                               const std::string& where = "model");

  bool resolved() const { return kind_ != nullptr; }
  // Whether this spec was resolved for these values of the fields beside it.
  bool resolved_for(const std::string& kind, int64_t n_layer, int64_t n_sink) const;
  const AttentionKind& kind() const { return *kind_; }
  int64_t n_layer() const { return n_layer_; }
  int64_t n_sink() const { return n_sink_; }

  // Whether layer `layer` applies the kind's step (false everywhere for a kind without one).
  bool uses_step(int64_t layer) const;
  // The value of the kind's key `key` (its default where not set): an enum E for a
  // choice (option<OutGate>("out_gate")), bool, int64_t or double for the others.
  template <class T>
  T option(std::string_view key) const;

  std::string name() const;
  std::string describe() const;
  // The keys of kinds as a config writes them: every always-written key of every
  // kind (its default where this kind does not own it) and this kind's other keys
  // where they were set.
  json written() const;
  // What the keys mean: written() with this kind's keys all present (the default
  // where not set) and the step's layers as one spelling: null for every layer, else
  // its runs of consecutive layers as [first, last] pairs ("last 2" of four layers
  // and [3, 2] are [[2, 3]]).
  json meaning() const;

 private:
  struct Entry {
    const KindKey* key;
    Value value;
    bool set = false;  // the config spelled it out
  };
  const Entry& entry(std::string_view key) const;
  json value_json(const Entry& e) const;
  bool shown(const Entry& e) const;
  // The layers that take the step as runs [first, last], in order; none without a step.
  std::vector<std::pair<int64_t, int64_t>> step_runs() const;

  const AttentionKind* kind_ = nullptr;
  std::vector<Entry> entries_;        // the kind's keys, in its row's order
  std::optional<StepLayers> layers_;  // its layers key's value, for a kind that has one
  int64_t n_layer_ = 0, n_sink_ = 0;
};

// The one rule for a key of an attention kind that `kind` does not own (model.xsa_gate on
// an sa model, model.out_gate on an xsa one): it is refused whatever its value, naming
// the kind that owns it, since the model would ignore it and a person who set it meant
// another model. The one spelling let through is the saved one: every config.json the
// program writes carries xsa_layers and xsa_gate at their defaults whatever the kind
// (AttentionSpec::written), so in a config file (`from_file`) those keys at their
// defaults are read as left out, and saved configs and checkpoints keep loading. An
// override (--set, and a sweep's "set", variants, grid and rungs, which are --set) is
// what someone asked for, and is refused at any value. ConfigError naming `where`.name.
void refuse_foreign_kind_key(const AttentionKind& kind, const std::string& name, const json& value, bool from_file,
                             const std::string& where = "model");

template <class T>
T AttentionSpec::option(std::string_view key) const {
  const auto& e = entry(key);
  if constexpr (std::is_enum_v<T>) {
    return schema::enum_from_name<T>(std::get<std::string>(e.value), std::string("model.") + e.key->name);
  } else {
    return std::get<T>(e.value);
  }
}

}  // namespace xsagpt
