// The sweep files the C++ sweep tests read: a base run config in the test's folder (a
// tiny model over shards that need not exist: load_sweep resolves and checks every
// point's config, never its data) and a sweep file naming it, with each test's keys.
// One fixture for every sweep test, each test file deriving its own (gtest names
// a test by its fixture); outside any anonymous namespace, as unity builds include one
// test file in another.
#pragma once

#include "helpers.h"
#include "sweep/grid.h"

#include <fstream>
#include <string>

namespace xsagpt::test {

class SweepFiles : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    write_base();
  }
  // The base run config, tmp/base.json, with `changes` merged in (RFC 7386).
  void write_base(const json& changes = json::object()) const {
    json base = {{"model", "tiny"},
                 {"data", {{"train", "a/*.bin"}, {"val", "b/*.bin"}}},
                 {"train", {{"seq_len", 64}, {"micro_batch", 4}, {"eval_tokens", 256}}},
                 {"out_dir", "unused"}};
    base.merge_patch(changes);
    std::ofstream(tmp / "base.json") << base.dump();
  }
  // tmp/sweep.json: the base, out_dir tmp/sweep and `keys` (a null value: the key left out).
  std::filesystem::path spec(const json& keys) const {
    json j = {{"base", (tmp / "base.json").string()}, {"out_dir", (tmp / "sweep").string()}};
    j.update(keys);
    for (const auto& [k, v] : keys.items())
      if (v.is_null()) j.erase(k);
    std::ofstream(tmp / "sweep.json") << j.dump();
    return tmp / "sweep.json";
  }
  // What loading a sweep file of `keys` refuses, in its words.
  std::string error_of(const json& keys) const {
    return test::error_of<ConfigError>([&] { load_sweep(spec(keys).string(), 1); });
  }
};

}  // namespace xsagpt::test
