// Sweep files that try to escape: grid values that are paths, sweep keys of the
// wrong type, and a plot command that must never go through a shell.
#include "helpers.h"
#include "sweep/summary.h"
#include "sweep_files.h"
#include "util/spawn.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>

using namespace xsagpt;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

class Sweeps : public test::SweepFiles {};

// Grid values with '/' made nested run directories, and '..' left the sweep's.
TEST_F(Sweeps, EveryPointIsOneDirectoryInsideTheSweep) {
  auto s = load_sweep(spec({{"grid", {{"data.train", {"../../escaped/*.bin", "a/b/*.bin", "x%2Fy"}}}}}).string(), 1);
  ASSERT_EQ(s.points.size(), 3u);
  std::set<std::string> names;
  for (const auto& p : s.points) {
    const fs::path out = p.config.out_dir;
    EXPECT_EQ(out.parent_path(), tmp / "sweep") << out;
    EXPECT_EQ(out.filename().string(), p.name);
    EXPECT_EQ(p.name.find('/'), std::string::npos) << p.name;
    EXPECT_EQ(fs::weakly_canonical(out).parent_path(), fs::weakly_canonical(tmp / "sweep"));
    names.insert(p.name);
  }
  EXPECT_TRUE(names.count("data.train=..%2F..%2Fescaped%2F*.bin"));
  EXPECT_TRUE(names.count("data.train=x%252Fy"));                      // '%' is escaped too: no two values share a name
  EXPECT_EQ(s.points[0].values["data.train"], "../../escaped/*.bin");  // the value itself is unchanged
  EXPECT_EQ(s.points[0].config.data.train, "../../escaped/*.bin");
  EXPECT_EQ(safe_name_part("a\nb\\c"), "a%0Ab%5Cc");
}

TEST_F(Sweeps, BadSweepKeysNameTheFileAndTheKey) {
  const auto file = (tmp / "sweep.json").string();
  // Raw nlohmann type_error before.
  EXPECT_THAT(error_of({{"grid", {{"train.lr", {1e-3}}}}, {"constant_batch_tokens", "yes"}}),
              HasSubstr(file + ": constant_batch_tokens: expected true or false, got \"yes\""));
  EXPECT_THAT(error_of({{"grid", {{"train.lr", {1e-3}}}}, {"set", {"train.seed=1", 5}}}),
              HasSubstr(file + ": set: expected a list of \"section.key=value\" strings, got 5"));
  EXPECT_THAT(error_of({{"grid", {{"train.lr", {1e-3, 0.001}}}}}),
              HasSubstr("two points are both named train.lr=0.001"));
  EXPECT_THAT(error_of({{"grid", {{"data.train", {std::string(300, 'a')}}}}}), HasSubstr("at most 200"));
}

// The plot step ran `std::system` with naive quoting: an out_dir of
// o'; touch INJECTED; echo ' ran the touch.
TEST_F(Sweeps, ProgramsRunWithoutAShell) {
  const std::string evil = (tmp / "o'; touch INJECTED; echo '").string();
  const auto cwd = fs::current_path();
  fs::current_path(tmp);
  const int status = run_program({"touch", evil});
  fs::current_path(cwd);
  EXPECT_EQ(status, 0);
  EXPECT_TRUE(fs::exists(evil));  // the argument reached the program as it is
  EXPECT_FALSE(fs::exists(tmp / "INJECTED"));
  EXPECT_EQ(run_program({"false"}), 1);
  EXPECT_EQ(run_program({"no-such-program-xsagpt"}), -1);
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote("/a/b.py"), "/a/b.py");
}

// Points that resolve to one run config are refused naming both, however far apart in
// the grid (each resolved config is looked up among those before it, not compared
// pairwise) and however the value is spelled (1 and 1.0 meet).
TEST_F(Sweeps, PointsThatResolveToOneRunAreNamedWhereverTheyAre) {
  EXPECT_THAT(error_of({{"grid", {{"train.lr", {1e-3, 2e-3}}, {"train.seed", {1, 2, 3, 1.0}}}}}),
              HasSubstr("points train.lr=0.001,train.seed=1 and train.lr=0.001,train.seed=1.0 resolve to the same "
                        "run config"));
  EXPECT_THAT(error_of({{"variants", {{"sa", json::object()}, {"sa-again", {{"model.attention", "sa"}}}}},
                        {"baseline", "sa"},
                        {"grid", {{"train.seed", {1, 2}}}}}),
              HasSubstr("points sa,train.seed=1 and sa-again,train.seed=1 resolve to the same run config"));
  EXPECT_EQ(
      load_sweep(spec({{"grid", {{"train.lr", {1e-3, 2e-3}}, {"train.seed", {1, 2, 3}}}}}).string(), 1).points.size(),
      6u);
}

// Two variants that are one model however they spell it (a kind's key at its default,
// or the step's layers as "last N" on an N-layer model) would train the same run twice
// under two names: refused naming both, as two spellings of one grid value are.
TEST_F(Sweeps, VariantsThatSpellOneModelAreRefused) {
  auto error_with = [&](const json& other) {
    return error_of(
        {{"variants", {{"gated", {{"model.attention", "gated"}}}, {"other", other}}}, {"baseline", "gated"}});
  };
  EXPECT_THAT(error_with({{"model.attention", "gated"}, {"model.out_gate", "headwise"}}),
              HasSubstr("points gated and other resolve to the same run config"));
  EXPECT_THAT(error_of({{"variants",
                         {{"xsa", {{"model.attention", "xsa_token"}}},
                          {"all", {{"model.attention", "xsa_token"}, {"model.xsa_layers", "last 4"}}}}},
                        {"baseline", "xsa"}}),
              HasSubstr("points xsa and all resolve to the same run config"));
  // A value away from the default is another model.
  const auto s = load_sweep(spec({{"variants",
                                   {{"gated", {{"model.attention", "gated"}}},
                                    {"wide", {{"model.attention", "gated"}, {"model.out_gate", "elementwise"}}}}},
                                  {"baseline", "gated"}})
                                .string(),
                            1);
  EXPECT_EQ(s.points.size(), 2u);
}
