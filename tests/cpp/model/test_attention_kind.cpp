// model.attention as a name of the kinds' table, its kind's keys read as typed values
// into one AttentionSpec (their JSON form stays the strings, so old configs and
// checkpoints read unchanged), the keys a kind owns refused on another kind, each
// layer's LayerAttention taken from the spec, the table's two halves (config/ and
// model/) kept in step, and bench's variant names parsed through the same table.
#include "bench/block_bench.h"
#include "config/run_config.h"
#include "helpers.h"
#include "model/attention_kinds.h"
#include "model/counts.h"
#include "model/gpt.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

using namespace xsagpt;
using ::testing::HasSubstr;

namespace {

TEST(AttentionKind, ReadAndWrittenAsTheNamesConfigsHold) {
  const auto c = model_config_from_json({{"attention", "xsa"}, {"xsa_gate", "sa"}, {"n_layer", 2}});
  EXPECT_EQ(c.attention, "xsa");
  EXPECT_EQ(c.spec().option<XsaGate>("xsa_gate"), XsaGate::kSa);
  const auto j = to_json(c);
  EXPECT_EQ(j["attention"], "xsa");
  EXPECT_EQ(j["xsa_gate"], "sa");
  EXPECT_EQ(to_json(ModelConfig{})["attention"], "sa");  // the default, as docs/config-reference.md shows it
  // Every config carries xsa_layers and xsa_gate, as configs always have, whatever its kind.
  EXPECT_EQ(to_json(ModelConfig{})["xsa_gate"], "off");
  EXPECT_TRUE(to_json(ModelConfig{}).contains("xsa_layers") && to_json(ModelConfig{})["xsa_layers"].is_null());
  EXPECT_EQ(to_json(model_config_from_json(j)), j);  // a saved config reads back as itself

  auto error_of = [](const json& m) { return test::error_of<ConfigError>([&] { model_config_from_json(m); }); };
  // The choices are the kinds' table's names, whatever kinds it has.
  EXPECT_THAT(attention_kind_choices(), HasSubstr("\"sa\""));
  EXPECT_THAT(attention_kind_choices(), HasSubstr("\"xsa\""));
  EXPECT_THAT(error_of({{"attention", "linear"}}),
              HasSubstr("model.attention: expected " + attention_kind_choices() + ", got \"linear\""));
  EXPECT_THAT(error_of({{"attention", 1}}), HasSubstr("model.attention: expected a string, got 1"));
  EXPECT_THAT(error_of({{"attention", "xsa"}, {"xsa_gate", "on"}}),
              HasSubstr("model.xsa_gate: expected \"off\", \"sa\" or \"xsa\", got \"on\""));
  EXPECT_THAT(error_of({{"xsa_gate", "sa"}}), HasSubstr("needs attention=\"xsa\" (attention is \"sa\")"));
  EXPECT_THAT(error_of({{"attention", "xsa"}, {"xsa_layers", "last 99999999999999999999"}}),
              HasSubstr("model.xsa_layers: expected \"last N\""));
}

TEST(LayerAttention, EachLayerKnowsWhatItComputes) {
  auto cfg = test::small_model("xsa");
  cfg.n_layer = 3;
  cfg.set_attention("xsa", {{"xsa_layers", "last 1"}, {"xsa_gate", "sa"}});
  cfg.n_sink = 2;  // a field beside the spec, changed after it was resolved: spec() follows it
  GPT model(cfg);
  std::vector<std::string> got;
  for (const auto& b : *model->transformer->h) {
    const auto& attn = b->as<Block>()->attn;
    got.push_back(attn->describe());
    EXPECT_EQ(attn->computes.kind, "xsa");
    EXPECT_EQ(test::own_param(*attn, "xsa_gate").defined(), attn->computes.step);  // the gate exists where it applies
  }
  EXPECT_EQ(got, (std::vector<std::string>{"sa (xsa model, step not in this layer), 2 sinks",
                                           "sa (xsa model, step not in this layer), 2 sinks",
                                           "xsa, gated (starts as sa), 2 sinks"}));
  EXPECT_EQ(cfg.spec().describe(), "xsa in layer 2, gated (starts as sa), 2 sinks");
  cfg.set_attention("xsa", {{"xsa_layers", {0, 2}}, {"xsa_gate", "sa"}});
  EXPECT_EQ(cfg.spec().describe(), "xsa in layers 0,2, gated (starts as sa), 2 sinks");
  EXPECT_EQ(test::small_model("sa").spec().describe(), "sa");
  EXPECT_EQ(test::small_model("xsa").spec().describe(), "xsa");
  // The variant name (eval's reports, config.json's "variant"): the keys as written.
  EXPECT_EQ(cfg.spec().name(), "xsa layers=[0,2] gate=sa sinks=2");
  EXPECT_EQ(to_json(RunConfig{.model = cfg})["variant"], cfg.spec().name());
  EXPECT_EQ(test::small_model("sa").spec().name(), "sa");
  auto last = cfg;
  last.set_attention("xsa", {{"xsa_layers", "last 1"}, {"xsa_gate", "sa"}});
  EXPECT_EQ(last.spec().name(), "xsa layers=last 1 gate=sa sinks=2");
  auto gated = test::small_model("gated");
  gated.set_attention("gated", {{"out_gate", "elementwise"}});
  EXPECT_EQ(gated.spec().name(), "gated out_gate=elementwise");
  EXPECT_EQ(gated.spec().describe(), "gated, out_gate=elementwise");

  // Counts ask the same resolution: one alpha per head in each gated layer, as the model holds.
  int64_t params = 0;
  for (const auto& p : GPT(cfg)->unique_parameters()) params += p.numel();
  EXPECT_EQ(count_params(cfg).total, params);
  auto plain = cfg;
  plain.set_attention("xsa", {{"xsa_layers", {0, 2}}});
  plain.n_sink = 0;
  EXPECT_EQ(count_params(cfg).non_embedding - count_params(plain).non_embedding,
            2 * cfg.n_head + cfg.n_sink * cfg.d_model);  // two gated layers, two sinks
}

// A value of another kind's key, away from its default: a choice's other value, or
// for the layers "last 1".
json non_default(const KindKey& k) {
  if (k.type == KeyType::kChoice)
    for (const auto& c : k.choices)
      if (json(c) != k.default_value) return c;
  return "last 1";
}

TEST(AttentionKind, EveryKindsKeysAreRefusedOnAnotherKind) {
  // Each key a row owns, set on a model of a kind that does not own it, is an error
  // naming the key and the kinds it belongs to: the table itself drives the check.
  int checked = 0;
  for (const auto& owner : attention_kinds())
    for (const auto& key : owner.keys)
      for (const auto& other : attention_kinds()) {
        if (std::any_of(other.keys.begin(), other.keys.end(), [&](const KindKey& k) { return k.name == key.name; }))
          continue;
        json m = {{"attention", other.name}, {key.name, non_default(key)}};
        EXPECT_THAT(test::error_of<ConfigError>([&] { model_config_from_json(m); }),
                    HasSubstr(fmt::format("model.{}: a key of ", key.name)))
            << other.name;
        ++checked;
      }
  EXPECT_GE(checked, 3);  // xsa_gate on three kinds at least
  json xsa_layers_on_sa = {{"attention", attention_kinds().front().name}, {"xsa_layers", "last 1"}};
  EXPECT_THAT(test::error_of<ConfigError>([&] { model_config_from_json(xsa_layers_on_sa); }),
              HasSubstr("model.xsa_layers: a key of attention=\"xsa\""));
  EXPECT_EQ(attention_kinds().front().name, std::string("sa"));  // the default kind
}

// A kind's keys keep their JSON types in the spec: a choice is read as its enum, the
// layers as the steps they select, numbers and booleans as themselves; a value of
// another type is refused naming the key. The table's kinds have choices and layers
// only, so a made-up row holds the other types.
TEST(AttentionSpec, KeysAreTypedValuesOfTheirRow) {
  const AttentionKind made_up{"made_up",
                              "a kind no table holds",
                              {{"flag", KeyType::kBool, false, "a boolean", {}, "flag", ", flag={}"},
                               {"width", KeyType::kInteger, 4, "an integer", {}, "width", ""},
                               {"scale", KeyType::kNumber, 0.5, "a number", {}, "scale", ""}},
                              /*step=*/true};
  const auto s = AttentionSpec::resolve(made_up, {{"flag", true}, {"scale", 2.5}}, 3, 0);
  EXPECT_TRUE(s.option<bool>("flag"));
  EXPECT_EQ(s.option<int64_t>("width"), 4);  // its default
  EXPECT_EQ(s.option<double>("scale"), 2.5);
  EXPECT_TRUE(s.uses_step(0) && s.uses_step(2) && !s.uses_step(3));  // no layers key: every layer
  EXPECT_EQ(s.name(), "made_up flag=true scale=2.5");                // the keys set, as written
  EXPECT_EQ(s.describe(), "made_up, flag=true");
  EXPECT_EQ(s.meaning()["width"], 4);  // a key left out means its default
  EXPECT_FALSE(s.written().contains("width"));
  auto error_of = [&](const json& keys) {
    return test::error_of<ConfigError>([&] { AttentionSpec::resolve(made_up, keys, 3, 0); });
  };
  EXPECT_THAT(error_of({{"flag", 1}}), HasSubstr("model.flag: expected true or false, got 1"));
  EXPECT_THAT(error_of({{"width", 1.5}}), HasSubstr("model.width: expected an integer"));
  EXPECT_THAT(error_of({{"scale", "big"}}), HasSubstr("model.scale: expected a number"));
  EXPECT_THAT(error_of({{"out_gate", "elementwise"}}), HasSubstr("model.out_gate: a key of attention=\"gated\""));
}

// The layers a kind's step takes, however they are spelled, and what the spellings mean.
TEST(AttentionSpec, StepLayersAndTheirMeaning) {
  auto spec = [](const json& layers, int64_t n_layer) {
    return AttentionSpec::resolve("xsa_token", {{"xsa_layers", layers}}, n_layer, 0);
  };
  const json layers_2_3 = json::array({json::array({2, 3})});  // one run, layers 2 to 3
  EXPECT_EQ(spec("last 2", 4).meaning()["xsa_layers"], layers_2_3);
  EXPECT_EQ(spec({3, 2}, 4).meaning()["xsa_layers"], layers_2_3);
  EXPECT_EQ(spec({0, 2, 3, 2}, 4).meaning()["xsa_layers"], json::array({json::array({0, 0}), json::array({2, 3})}));
  EXPECT_TRUE(spec({0, 2}, 4).uses_step(2) && !spec({0, 2}, 4).uses_step(1) && !spec("last 1", 4).uses_step(2));
  EXPECT_EQ(spec({3, 2}, 4).written()["xsa_layers"], json({3, 2}));  // as written
  EXPECT_TRUE(spec("last 4", 4).meaning()["xsa_layers"].is_null());  // every layer: as null means
  EXPECT_TRUE(spec({0, 1, 2, 3}, 4).meaning()["xsa_layers"].is_null());
  EXPECT_EQ(spec("last 4", 4).written()["xsa_layers"], "last 4");
  EXPECT_EQ(spec("last 4", 4).name(), "xsa_token layers=last 4");
  EXPECT_EQ(AttentionSpec::resolve("xsa", json::object(), 4, 0).meaning(),
            AttentionSpec::resolve("xsa", {{"xsa_layers", "last 4"}}, 4, 0).meaning());
  // Gated owns no layers key: its step is in every layer, and its key means its default when left out.
  const auto gated = AttentionSpec::resolve("gated", json::object(), 3, 0);
  EXPECT_TRUE(gated.uses_step(0) && gated.uses_step(2));
  EXPECT_EQ(gated.meaning(), AttentionSpec::resolve("gated", {{"out_gate", "headwise"}}, 3, 0).meaning());
  EXPECT_NE(gated.written(), AttentionSpec::resolve("gated", {{"out_gate", "headwise"}}, 3, 0).written());
}

// The table's two halves: the config's (names, keys) and the model's (factories, hooks),
// a row each in the same order, and every parameter a kind's step registers on a layer
// declared in its row (where Muon's share and its role under μP are decided).
TEST(AttentionKind, TheTablesTwoHalvesAreInStep) {
  const auto kinds = attention_kinds();
  const auto rows = attention_kind_rows();
  ASSERT_EQ(kinds.size(), rows.size());
  for (size_t i = 0; i < kinds.size(); ++i) {
    SCOPED_TRACE(kinds[i].name);
    EXPECT_EQ(std::string(rows[i].name), kinds[i].name);
    EXPECT_EQ(rows[i].make != nullptr, kinds[i].step);  // a step where the config says one
    auto cfg = test::small_model(kinds[i].name);
    cfg.set_attention(kinds[i].name, kinds[i].name == std::string("xsa") ? json{{"xsa_gate", "sa"}} : json::object());
    EXPECT_EQ(&attention_kind_row(cfg.spec()), &rows[i]);
    GPT model(cfg);
    std::set<std::string> own;
    for (const auto& p : model->transformer->h[0]->as<Block>()->attn->named_parameters(/*recurse=*/false))
      own.insert(p.key());
    std::set<std::string> declared{"c_attn.weight", "c_proj.weight"};
    for (const auto& p : rows[i].parameters) {
      declared.insert(p.name);
      // What μP does with it (model.parametrization "mup"): a hidden matrix or a vector.
      EXPECT_NE(p.width, WidthRole::kUnsaid)
          << "attention \"" << kinds[i].name << "\" does not say whether its parameter " << p.name
          << " is a hidden matrix (StepParameter::width in src/model/attention_kinds.cpp)";
    }
    for (const auto& name : own) EXPECT_TRUE(declared.count(name)) << name << " is not in its row's parameters";
  }
}

TEST(BenchVariant, NamesAreAnAttentionKindAndAnXsaImplementation) {
  const auto v = parse_bench_variant("xsa-fused@weights+norm");
  EXPECT_EQ(v.kind, "xsa");
  EXPECT_EQ(v.xsa_impl, XsaImpl::kFused);
  EXPECT_EQ(v.kernels, "weights+norm");
  EXPECT_EQ(parse_bench_variant("sa").kind, "sa");
  EXPECT_FALSE(parse_bench_variant("xsa").xsa_impl.has_value());
  EXPECT_EQ(parse_bench_variant("xsa-autograd").xsa_impl, XsaImpl::kComposed);
  EXPECT_EQ(variant_config(test::small_model("sa"), "xsa-ops").attention, "xsa");
  // A variant is the kind with its keys at their defaults, whatever the base model's were.
  auto gated = test::small_model("gated");
  gated.set_attention("gated", {{"out_gate", "elementwise"}});
  EXPECT_EQ(variant_config(gated, "gated").spec().name(), "gated");
  // '+' joins kernel names and the sets a list may hold: xsa@fused+fp8 is fused with fp8.
  auto with_fp8 = parse_kernels("fused", false);
  with_fp8.fp8 = true;
  EXPECT_EQ(variant_runtime(Runtime{}, "xsa@fused+fp8", false).kernels, with_fp8);
  EXPECT_FALSE(variant_runtime(Runtime{}, "xsa@fused", false).kernels.fp8);
  for (const std::string bad : {"linear", "sa-ops", "xsa-fast", "xsa-", "-ops", ""})
    EXPECT_THAT(test::error_of<ConfigError>([&] { parse_bench_variant(bad); }),
                HasSubstr("bench variant \"" + bad + "\": expected an attention (" + attention_kind_choices() + ")"));
}

}  // namespace
