// Model config reading: defaults, unknown keys, types, impossible values.
#include "config/config_diff.h"
#include "config/model_config.h"
#include "config/resume_check.h"
#include "config/run_config.h"
#include "helpers.h"
#include "util/json_read.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

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
  EXPECT_THAT(model_error_of({{"attention", "linear"}}), HasSubstr("model.attention: expected " + attention_kind_choices()));
  EXPECT_THAT(model_error_of({{"attention", "xsa"}, {"xsa_layers", "first 2"}}), HasSubstr("model.xsa_layers"));
  EXPECT_THAT(model_error_of({{"attention", "xsa"}, {"n_layer", 2}, {"xsa_layers", {0, 2}}}),
              HasSubstr("model.xsa_layers: layer indices must be integers in [0, 2)"));
  EXPECT_THAT(model_error_of({{"xsa_layers", {0}}}), HasSubstr("model.xsa_layers: a key of attention=\"xsa\""));
  EXPECT_THAT(model_error_of({{"xsa_layers", {0}}}), HasSubstr("(attention is \"sa\")"));
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

// nlohmann::json dumps and compares recursively: a value nested 100,000 deep crashed
// the message that showed it. The depth is limited while the text is read.
class JsonRead : public test::TempDirTest {};

TEST_F(JsonRead, NestingDeeperThanTheLimitIsRefusedWhileReading) {
  auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  json j = parse_json(nested(kMaxJsonDepth), "x");
  int depth = 1;
  for (const json* v = &j; !v->empty(); v = &(*v)[0]) ++depth;
  EXPECT_EQ(depth, kMaxJsonDepth);
  EXPECT_EQ(test::error_of<JsonDepthError>([&] { parse_json(nested(kMaxJsonDepth + 1), "f.json"); }),
            "f.json: JSON nested more than 64 levels deep (arrays and objects inside each other); expected at most 64");
  EXPECT_TRUE(parse_json_or_discarded(nested(100000)).is_discarded());
  EXPECT_TRUE(parse_json_or_discarded("{\"a\": ").is_discarded());
  EXPECT_THROW(parse_json("{\"a\": ", "x"), json::parse_error);  // callers keep their own syntax messages
  const auto f = tmp / "deep.json";
  std::ofstream(f) << "{\"model\": " << nested(100000) << "}";
  EXPECT_THAT(test::error_of<ConfigError>([&] { read_json_file(f); }),
              HasSubstr(f.string() + ": JSON nested more than 64 levels deep"));
}

// A literal NaN or Infinity (Python's json.dumps writes them) is a damaged line named by
// file and line, not a syntax error; inside a string it is only text.
TEST_F(JsonRead, ANonFiniteLiteralIsNamedByFileAndLine) {
  EXPECT_EQ(nonfinite_literal_line("{\"a\": NaN}"), 1);
  EXPECT_EQ(nonfinite_literal_line("{\"a\": 1,\n \"b\": -Infinity}"), 2);
  EXPECT_EQ(nonfinite_literal_line("[1,\n2,\n Infinity]"), 3);
  EXPECT_EQ(nonfinite_literal_line("{\"a\": inf}"), 1);
  EXPECT_EQ(nonfinite_literal_line("{\"NaN\": \"Infinity \\\" NaN\"}"), std::nullopt);  // strings, escapes too
  EXPECT_EQ(nonfinite_literal_line("{\"a\": null, \"b\": 1e308}"), std::nullopt);
  EXPECT_EQ(nonfinite_literal_message("m.jsonl", 7),
            "m.jsonl:7: a non-finite literal (NaN/Infinity) is not valid JSON; the trainer writes null");
  const auto f = tmp / "done.json";
  std::ofstream(f) << "{\n  \"step\": 8,\n  \"final_val_loss\": Infinity\n}\n";
  // Before: "not valid JSON (... syntax error ...)", naming no line or rule.
  EXPECT_EQ(test::error_of<ConfigError>([&] { read_json_file(f); }), nonfinite_literal_message(f.string(), 3));
  std::ofstream(f) << "{\"step\": 8,";  // a torn file stays a syntax error
  EXPECT_THAT(test::error_of<ConfigError>([&] { read_json_file(f); }), HasSubstr("not valid JSON"));
}

// A number no double holds is valid JSON text; nlohmann refused it naming neither the
// source nor the key.
TEST(JsonReadNumbers, ANumberOutOfRangeNamesTheSourceAndTheKey) {
  EXPECT_EQ(parse_json("[1e308]", "x")[0].get<double>(), 1e308);
  EXPECT_THAT(test::error_of<ConfigError>([] { parse_json("{\"train\": {\"lr\": 1e999}}", "f.json"); }),
              HasSubstr("f.json: the value of \"lr\" holds a number out of a double's range"));
  EXPECT_THAT(test::error_of<ConfigError>([] { parse_json("1e999", "--set train.lr"); }),
              HasSubstr("--set train.lr: a number out of a double's range"));
  EXPECT_TRUE(parse_json_or_discarded("{\"a\": 1e999}").is_discarded());
}

// Whether a run directory holds the run a config means: out_dir aside, the first key
// that differs is named, depth first.
TEST(ConfigDifference, IgnoresOutDirAndNamesTheFirstKeyThatDiffers) {
  RunConfig a;
  a.out_dir = "runs/here";
  RunConfig b = a;
  b.out_dir = "elsewhere/moved";
  EXPECT_FALSE(config_difference(to_json(a), to_json(b)).has_value());
  b.train.seed = a.train.seed + 1;
  b.model.attention = a.model.attention == "xsa" ? "sa" : "xsa";
  const auto d = config_difference(to_json(a), to_json(b));
  ASSERT_TRUE(d.has_value());
  EXPECT_THAT(*d, HasSubstr("model.attention is "));  // model comes before train
  json missing = to_json(a);
  missing.erase("train");
  EXPECT_EQ(config_difference(missing, to_json(a)).value_or(""),
            "train is missing there, " + to_json(a)["train"].dump() + " here");
  EXPECT_EQ(config_difference(json::array(), to_json(a)).value_or(""), "it is not a run config (not a JSON object)");
}

// An upgrade refused a sweep in progress: its points' config.json lacked the keys added
// since (model.gelu, the similarity keys), "model.gelu is missing there". A key a saved
// config lacks means its default, which does what runs did before the key existed; the
// sweep's point check and the resume read it so alike.
TEST(ConfigDifference, AKeyASavedConfigLacksIsItsDefault) {
  RunConfig cfg;
  cfg.out_dir = "sw/xsa";
  cfg.model.attention = "xsa";
  cfg.train.lr = 1e-3;
  json old = to_json(cfg);  // as a version before these keys wrote it
  for (const auto& [section, key] : {std::pair{"model", "gelu"},
                                     {"train", "eval_similarity_sequences"},
                                     {"train", "eval_similarity_positions"}}) {
    ASSERT_TRUE(old[section].contains(key));
    old[section].erase(key);
  }
  old.erase("variant");
  EXPECT_FALSE(config_difference(old, to_json(cfg)).has_value());
  EXPECT_NO_THROW(check_resume_compatible(cfg, old, "ck.pt"));

  // Where the config asks for other than the default, the absent key is a difference,
  // named with the default it stood for.
  RunConfig tanh = cfg;
  tanh.model.gelu = GeluKind::kTanh;
  EXPECT_EQ(config_difference(old, to_json(tanh)).value_or(""),
            "model.gelu is missing there (its default \"exact\"), \"tanh\" here");
  EXPECT_THAT(test::error_of<ConfigError>([&] { check_resume_compatible(tanh, old, "ck.pt"); }),
              HasSubstr("ck.pt: model.gelu is \"exact\" in the checkpoint but \"tanh\" in this config"));
  // A key the saved config has that this version does not know (a newer version's) still differs.
  json newer = to_json(cfg);
  newer["model"]["from_the_future"] = 1;
  EXPECT_EQ(config_difference(newer, to_json(cfg)).value_or(""), "model.from_the_future is 1 there, missing here");
  // Values present are compared as before.
  json other = old;
  other["train"]["lr"] = 6e-4;
  EXPECT_EQ(config_difference(other, to_json(cfg)).value_or(""), "train.lr is 0.0006 there, 0.001 here");
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

// A kind's key at its default is the same config as the key left out, and the layers
// of a kind's step mean what they select however spelled: saved_meaning decides, for
// the sweep's point check (config_difference) and for resume alike.
namespace {
RunConfig kind_run(const std::string& kind, const json& keys, int64_t n_layer = 2) {
  RunConfig c;
  c.out_dir = "runs/k";
  c.model.n_layer = n_layer;
  c.model.set_attention(kind, keys);
  return c;
}
}  // namespace

TEST(ConfigDifference, AKindsKeyAtItsDefaultIsTheKeyLeftOut) {
  const json saved = to_json(kind_run("gated", json::object()));  // trained without model.out_gate
  ASSERT_FALSE(saved["model"].contains("out_gate"));
  const auto spelled = kind_run("gated", {{"out_gate", "headwise"}});  // --set model.out_gate=headwise
  ASSERT_TRUE(to_json(spelled)["model"].contains("out_gate"));
  EXPECT_FALSE(config_difference(saved, to_json(spelled)).has_value());  // --force: nothing to run again
  EXPECT_NO_THROW(check_resume_compatible(spelled, saved, "ck.pt"));
  // ... and the other way round: saved spelled out, the key left out now.
  EXPECT_FALSE(config_difference(to_json(spelled), to_json(kind_run("gated", json::object()))).has_value());
  EXPECT_NO_THROW(check_resume_compatible(kind_run("gated", json::object()), to_json(spelled), "ck.pt"));
}

TEST(ConfigDifference, AKindsKeyAwayFromItsDefaultIsNamedWhereverItIsLeftOut) {
  const json elementwise = to_json(kind_run("gated", {{"out_gate", "elementwise"}}));
  const auto left_out = kind_run("gated", json::object());
  EXPECT_THAT(test::error_of<ConfigError>([&] { check_resume_compatible(left_out, elementwise, "ck.pt"); }),
              HasSubstr("ck.pt: model.out_gate is \"elementwise\" in the checkpoint but \"headwise\" in this config"));
  EXPECT_EQ(config_difference(elementwise, to_json(left_out)).value_or(""),
            "model.out_gate is \"elementwise\" there, \"headwise\" here");
  json old = to_json(left_out);
  EXPECT_EQ(config_difference(old, to_json(kind_run("gated", {{"out_gate", "elementwise"}}))).value_or(""),
            "model.out_gate is missing there (its default \"headwise\"), \"elementwise\" here");
}

TEST(ConfigDifference, StepLayersMeanTheLayersTheySelect) {
  for (const std::string kind : {"xsa", "xsa_token"}) {
    SCOPED_TRACE(kind);
    const json every = to_json(kind_run(kind, json::object(), 4));
    const auto last4 = kind_run(kind, {{"xsa_layers", "last 4"}}, 4);
    EXPECT_FALSE(config_difference(every, to_json(last4)).has_value());
    EXPECT_NO_THROW(check_resume_compatible(last4, every, "ck.pt"));
    EXPECT_NO_THROW(check_resume_compatible(kind_run(kind, json::object(), 4), to_json(last4), "ck.pt"));
    const auto last2 = kind_run(kind, {{"xsa_layers", "last 2"}}, 4);
    EXPECT_FALSE(config_difference(to_json(last2), to_json(kind_run(kind, {{"xsa_layers", {3, 2}}}, 4))));
    // A selection that differs is named as the file spells it.
    EXPECT_EQ(config_difference(to_json(last2), to_json(last4)).value_or(""),
              "model.xsa_layers is \"last 2\" there, null here");
    EXPECT_THAT(test::error_of<ConfigError>([&] { check_resume_compatible(last4, to_json(last2), "ck.pt"); }),
                HasSubstr("model.xsa_layers is \"last 2\" in the checkpoint but \"last 4\" in this config"));
  }
}

// A resume on another number of ranks keeps the tokens of an optimizer step, split
// another way, and says why its losses are not bit-exact; a step that would change
// is refused with the settings that keep it.
namespace {
RunConfig split_run(int64_t micro_batch, int64_t batch_tokens) {
  RunConfig c;
  c.train.seq_len = 32;
  c.train.micro_batch = micro_batch;
  c.train.batch_tokens = batch_tokens;
  return c;
}
}  // namespace

TEST(ResumeRanks, TheSameStepOnOtherRanksIsTakenSayingWhyItIsNotBitExact) {
  const json saved = to_json(split_run(3, 12 * 32));  // 12 sequences: 3 x 2 accumulation x 2 ranks
  EXPECT_EQ(check_resume_ranks(split_run(7, 0), saved, 2, 2, "ck.pt"), "");  // the same ranks: not checked here
  const auto line = check_resume_ranks(split_run(4, 12 * 32), saved, 2, 1, "ck.pt");
  EXPECT_THAT(line, HasSubstr("ck.pt was saved by 2 ranks, this run has 1 rank: each optimizer step still trains on "
                              "384 tokens"));
  EXPECT_THAT(line, HasSubstr("(micro_batch 3 x seq_len 32 x 2 accumulation x 2 ranks then, micro_batch 4 x seq_len "
                              "32 x 3 accumulation x 1 rank now)"));
  EXPECT_THAT(line, HasSubstr("not bit for bit: the gradient is summed over micro-batches and ranks in another order"));
  EXPECT_THAT(check_resume_ranks(split_run(2, 12 * 32), saved, 2, 3, "ck.pt"), HasSubstr("x 3 ranks now"));
  // A step of micro_batch x seq_len x ranks (batch_tokens 0) continues where batch_tokens spells it out.
  EXPECT_THAT(check_resume_ranks(split_run(4, 256), to_json(split_run(4, 0)), 2, 1, "ck.pt"),
              HasSubstr("still trains on 256 tokens"));
  // A checkpoint of a version without batch_tokens took its default, 0.
  json older = to_json(split_run(4, 0));
  older["train"].erase("batch_tokens");
  EXPECT_THAT(check_resume_ranks(split_run(2, 256), older, 2, 4, "ck.pt"), HasSubstr("still trains on 256 tokens"));
}

TEST(ResumeRanks, AStepThatWouldChangeIsRefusedNamingWhatKeepsIt) {
  const json saved = to_json(split_run(4, 0));  // 256 tokens: 4 x 32 x 2 ranks
  auto refusal = [&](const RunConfig& now, int64_t ranks) {
    return test::error_of<ConfigError>([&] { check_resume_ranks(now, saved, 2, ranks, "ck.pt"); });
  };
  // batch_tokens 0 follows the number of ranks: half the step on one.
  const auto one = refusal(split_run(4, 0), 1);
  EXPECT_THAT(one, HasSubstr("ck.pt: saved by 2 ranks, whose optimizer steps were 256 tokens (micro_batch 4 x seq_len "
                             "32 x 1 accumulation x 2 ranks), but this config makes them 128 tokens on 1 rank "
                             "(micro_batch 4 x seq_len 32 x 1 accumulation x 1 rank)"));
  EXPECT_THAT(one, HasSubstr("set train.batch_tokens=256 (micro_batch 4 x seq_len 32 x 2 accumulation x 1 rank)"));
  // On 4 ranks the 8 sequences leave 2 a rank: micro_batch comes down to them.
  EXPECT_THAT(refusal(split_run(4, 0), 4),
              HasSubstr("set train.batch_tokens=256 and train.micro_batch=2 (micro_batch 2 x seq_len 32 x 1 "
                        "accumulation x 4 ranks)"));
  // 8 sequences have no equal share on 3 ranks.
  EXPECT_THAT(
      refusal(split_run(1, 0), 3),
      HasSubstr("its 8 sequences of 32 tokens cannot be shared equally by 3 ranks; resume on 1, 2, 4, 8 ranks"));
  // A batch set to another size is a change of the step too.
  EXPECT_THAT(refusal(split_run(4, 512), 1), HasSubstr("makes them 512 tokens on 1 rank"));
  // A checkpoint whose train section is not numbers is named.
  json broken = saved;
  broken["train"]["micro_batch"] = "four";
  EXPECT_THAT(test::error_of<ConfigError>([&] { check_resume_ranks(split_run(4, 256), broken, 2, 1, "ck.pt"); }),
              HasSubstr("ck.pt: the checkpoint's train.micro_batch, seq_len and batch_tokens must be integers"));
}
