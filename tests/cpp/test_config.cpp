// Model config reading: defaults, unknown keys, types, impossible values.
#include "config/model_config.h"
#include "helpers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

using namespace xsagpt;
using ::testing::HasSubstr;

namespace {
std::string model_error_of(const json& j) {
  return test::error_of<ConfigError>([&] { model_config_from_json(j, "f.json: model"); });
}
}  // namespace

TEST(ModelConfig, DefaultsRoundTripThroughJson) {
  ModelConfig c;
  auto back = model_config_from_json(to_json(c));
  EXPECT_EQ(to_json(back), to_json(c));
  EXPECT_EQ(c.vocab_size, 50304);
}

TEST(ModelConfig, ErrorsNameTheKeyAndWhatWasExpected) {
  EXPECT_THAT(model_error_of({{"n_heads", 4}}), HasSubstr("f.json: model: unknown key 'n_heads'"));
  EXPECT_THAT(model_error_of({{"n_head", "four"}}), HasSubstr("f.json: model.n_head: expected an integer"));
  EXPECT_THAT(model_error_of({{"n_head", 0}}), HasSubstr("model.n_head: must be > 0"));
  EXPECT_THAT(model_error_of({{"head_dim", 33}}), HasSubstr("model.head_dim"));
  EXPECT_THAT(model_error_of({{"attention", "linear"}}), HasSubstr("model.attention: expected \"sa\" or \"xsa\""));
  EXPECT_THAT(model_error_of({{"attention", "xsa"}, {"xsa_layers", "first 2"}}), HasSubstr("model.xsa_layers"));
  EXPECT_THAT(model_error_of({{"attention", "xsa"}, {"n_layer", 2}, {"xsa_layers", {0, 2}}}),
              HasSubstr("model.xsa_layers: layer indices must be integers in [0, 2)"));
  EXPECT_THAT(model_error_of({{"xsa_layers", {0}}}), HasSubstr("only meaningful with attention=\"xsa\""));
  EXPECT_THAT(model_error_of({{"dropout", 1.5}}), HasSubstr("model.dropout"));
  EXPECT_THAT(model_error_of(json::array()), HasSubstr("expected a JSON object"));
}

TEST(ModelConfig, ShippedModelConfigsAllLoad) {
  for (const char* name : {"tiny", "gpt2-124m", "gpt2-350m", "paper-0.7b", "paper-1.4b", "paper-2.7b"}) {
    EXPECT_NO_THROW(load_model_config(test::source_path(std::string("configs/model/") + name + ".json"))) << name;
  }
}

TEST(ModelConfig, MissingOrBrokenFileIsNamed) {
  EXPECT_THAT(
      [] {
        try {
          load_model_config("/nonexistent/x.json");
        } catch (const ConfigError& e) {
          return std::string(e.what());
        }
        return std::string();
      }(),
      HasSubstr("/nonexistent/x.json"));
}

// `info` printed negative parameter counts for huge sizes (int64 overflow).
TEST(ModelConfig, SizesWhoseParameterCountOverflowsAreRefused) {
  EXPECT_THAT(model_error_of({{"n_layer", 1000000}, {"d_model", 4000000}, {"n_head", 1}, {"head_dim", 4000000}}),
              HasSubstr("more than a 64-bit count can hold"));
  EXPECT_THAT(model_error_of({{"vocab_size", 4000000000000}, {"d_model", 4000000}}),
              HasSubstr("f.json: model: n_layer"));
  EXPECT_EQ(model_error_of({{"n_layer", 96}, {"d_model", 12288}, {"n_head", 96}, {"head_dim", 128}}),
            "(no error)");  // GPT-3
}
