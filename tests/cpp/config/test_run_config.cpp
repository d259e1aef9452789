// Run configs: model references, --set overrides, validation naming the key.
#include "config/run_config.h"
#include "helpers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

using namespace xsagpt;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {
fs::path write_tmp(const std::string& name, const json& j) {
  auto dir = fs::temp_directory_path() / "xsagpt_run_config_test";
  fs::create_directories(dir);
  std::ofstream(dir / name) << j.dump(2);
  return dir / name;
}
const json kBase = {{"model", "tiny"},
                    {"data", {{"train", "a/*.bin"}, {"val", "b/*.bin"}}},
                    {"train", {{"seq_len", 64}, {"micro_batch", 4}}},
                    {"out_dir", "runs/x"}};

std::string run_error_of(const json& j, std::vector<std::string> sets = {}, int64_t world = 1) {
  return test::error_of<ConfigError>([&] { load_run_config(write_tmp("cfg.json", j).string(), sets, world); });
}
}  // namespace

TEST(RunConfig, ModelReferenceAndOverridesAreTyped) {
  auto path = write_tmp("ok.json", kBase);
  auto cfg = load_run_config(path.string(), {"model.attention=xsa", "train.lr=3e-4", "train.max_steps=10",
                                             "data.shuffle=false", "out_dir=runs/y"});
  EXPECT_EQ(cfg.model.attention, "xsa");
  EXPECT_EQ(cfg.model.d_model, load_model_config(test::source_path("configs/model/tiny.json")).d_model);
  EXPECT_DOUBLE_EQ(cfg.train.lr, 3e-4);
  EXPECT_EQ(cfg.train.max_steps, 10);
  EXPECT_FALSE(cfg.data.shuffle);
  EXPECT_EQ(cfg.out_dir, "runs/y");
  // The resolved config reads back to the same thing.
  EXPECT_EQ(to_json(run_config_from_json(to_json(cfg), "resolved")), to_json(cfg));
}

TEST(RunConfig, ModelBasePlusOverrides) {
  json j = kBase;
  j["model"] = {{"base", "tiny"}, {"attention", "xsa"}, {"n_layer", 2}};
  auto cfg = load_run_config(write_tmp("base.json", j).string());
  EXPECT_EQ(cfg.model.n_layer, 2);
  EXPECT_EQ(cfg.model.attention, "xsa");
}

TEST(RunConfig, BadValuesNameTheKey) {
  EXPECT_THAT(run_error_of(kBase, {"train.lr=-1"}), HasSubstr("train.lr: must be > 0"));
  EXPECT_THAT(run_error_of(kBase, {"train.lr=fast"}), HasSubstr("train.lr: expected a number, got \"fast\""));
  EXPECT_THAT(run_error_of(kBase, {"train.seq_len=100000"}), HasSubstr("train.seq_len: must be in 1..256"));
  EXPECT_THAT(run_error_of(kBase, {"train.batch_tokens=1000"}),
              HasSubstr("train.batch_tokens: must be 0 or a multiple"));
  EXPECT_THAT(run_error_of(kBase, {"train.batch_tokens=512"}, 4), HasSubstr("micro_batch*seq_len*world_size = 4*64*4"));
  EXPECT_THAT(run_error_of(kBase, {"train.learning_rate=1"}), HasSubstr("unknown key 'learning_rate'"));
  EXPECT_THAT(run_error_of(kBase, {"optim.lr=1"}), HasSubstr("unknown section 'optim'"));
  EXPECT_THAT(run_error_of(kBase, {"lr"}), HasSubstr("expected section.key=value"));
  EXPECT_THAT(run_error_of(kBase, {"model.attention=linear"}), HasSubstr("model.attention"));
  EXPECT_THAT(run_error_of(kBase, {"train.precision=fp8"}), HasSubstr("train.precision"));
  json no_data = kBase;
  no_data.erase("data");
  EXPECT_THAT(run_error_of(no_data), HasSubstr("data.train: required"));
  json bad_model = kBase;
  bad_model["model"] = "no-such-model";
  EXPECT_THAT(run_error_of(bad_model), HasSubstr("model config 'no-such-model': no such file"));
  json extra = kBase;
  extra["optimizer"] = json::object();
  EXPECT_THAT(run_error_of(extra), HasSubstr("unknown section 'optimizer'"));
}

TEST(RunConfig, MuonKeysAreChecked) {
  EXPECT_THAT(run_error_of(kBase, {"train.optimizer=sgd"}),
              HasSubstr("train.optimizer: expected \"adamw\" or \"muon\""));
  EXPECT_THAT(run_error_of(kBase, {"train.muon_lr=0"}), HasSubstr("train.muon_lr: must be > 0"));
  EXPECT_THAT(run_error_of(kBase, {"train.muon_momentum=1"}), HasSubstr("train.muon_momentum: must be in [0, 1)"));
  EXPECT_THAT(run_error_of(kBase, {"train.muon_ns_steps=0"}), HasSubstr("train.muon_ns_steps: must be in 1..99"));
  EXPECT_THAT(run_error_of(kBase, {"train.muon_weight_decay=-0.1"}), HasSubstr("train.muon_weight_decay"));
  EXPECT_THAT(run_error_of(kBase, {"train.muon_adjust_lr=spectral"}), HasSubstr("train.muon_adjust_lr: expected"));
  // Refused whatever the world size: a config meant for 8 GPUs fails on the laptop that writes it.
  EXPECT_THAT(run_error_of(kBase, {"train.optimizer=muon", "train.shard_optimizer=true"}),
              HasSubstr("train.shard_optimizer: not supported with train.optimizer=muon"));
  EXPECT_EQ(run_error_of(kBase, {"train.shard_optimizer=true"}), "(no error)");  // AdamW shards
  EXPECT_EQ(run_error_of(kBase, {"train.optimizer=muon", "train.muon_adjust_lr=match_rms_adamw"}), "(no error)");
}

TEST(RunConfig, AccumulationFromBatchTokens) {
  auto cfg = load_run_config(write_tmp("acc.json", kBase).string(), {"train.batch_tokens=2048"}, 2);
  EXPECT_EQ(cfg.accumulation_steps(2), 4);  // 2048 / (4*64*2)
  EXPECT_EQ(load_run_config(write_tmp("acc.json", kBase).string()).accumulation_steps(1), 1);
}

TEST(RunConfig, ShippedRunConfigsLoad) {
  for (const auto& e : fs::directory_iterator(test::source_path("configs/runs"))) {
    EXPECT_NO_THROW(load_run_config(e.path().string())) << e.path();
  }
}

// `base` was accepted in a file's model section but refused by --set.
TEST(RunConfig, ModelBaseCanBeSetLikeAnyKey) {
  json j = kBase;
  j["model"] = {{"base", "tiny"}, {"n_layer", 2}};
  const auto path = write_tmp("set_base.json", j).string();
  const auto gpt2 = load_model_config(test::source_path("configs/model/gpt2-124m.json"));
  auto cfg = load_run_config(path, {"model.base=gpt2-124m", "train.seq_len=64"});
  EXPECT_EQ(cfg.model.d_model, gpt2.d_model);  // from the new base
  EXPECT_EQ(cfg.model.n_layer, 2);             // the file's override still applies
  cfg = load_run_config(write_tmp("ref.json", kBase).string(), {"model.base=gpt2-124m", "model.n_layer=3"});
  EXPECT_EQ(cfg.model.d_model, gpt2.d_model);
  EXPECT_EQ(cfg.model.n_layer, 3);
  EXPECT_THAT(run_error_of(kBase, {"model.base=no-such-model"}),
              HasSubstr("model config 'no-such-model': no such file"));
}

// "max_tokens 10 ..." from the validation set, naming no key.
TEST(RunConfig, EvalTokensBelowOneBatchNameTheKey) {
  EXPECT_THAT(run_error_of(kBase, {"train.eval_tokens=10"}),
              HasSubstr("train.eval_tokens: 10 tokens is less than one validation batch of "
                        "micro_batch*seq_len*world_size = 4*64*1 = 256 tokens"));
  EXPECT_EQ(run_error_of(kBase, {"train.eval_tokens=256"}), "(no error)");
  EXPECT_EQ(run_error_of(kBase, {"train.eval_tokens=0"}), "(no error)");
}

// `-c DIR` answered "basic_filebuf::underflow ... Is a directory".
TEST(RunConfig, ADirectoryIsNotAConfigFile) {
  const auto dir = fs::temp_directory_path() / "xsagpt_run_config_test";
  fs::create_directories(dir);
  try {
    load_run_config(dir.string());
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr(dir.string() + ": is a directory, expected a JSON file"));
  }
}

// train.kernels: "auto" is the kernels the GPU verdict found default-worthy, on CUDA
// (the H200 verdict of 2026-11-26: the "fused" set, docs/benchmarks.md), and on a CPU
// the ATen twin that beat plain PyTorch's step there, the loss's; "fused" is every kernel, the vectorised XSA kernels included, but fp8,
// which changes the arithmetic, and gelu, which needs another model; a list names
// them and may hold "fused" or "auto" for their sets; describe() gives back what
// parse_kernels reads.
TEST(RunConfig, KernelNamesParseAndRoundTrip) {
  Kernels cpu;
  cpu.loss = true;
  EXPECT_EQ(parse_kernels("auto", /*cuda=*/false), cpu);
  const Kernels verdict{true, true, true, true, XsaImpl::kFusedWide};  // weights, norm, rope, loss, xsa_wide
  EXPECT_EQ(parse_kernels("auto", /*cuda=*/true), verdict);
  EXPECT_EQ(describe(parse_kernels("auto", true)), "weights,norm,rope,xsa_wide,loss");
  // What --help and `xsagpt config` say "auto" is on a GPU is that same set.
  EXPECT_THAT(kernels_help(), HasSubstr("\"auto\" (those validated on a GPU: weights,norm,rope,xsa_wide,loss on CUDA; "
                                        "on a CPU the ATen twins measured faster there: loss)"));
  EXPECT_EQ(parse_kernels("aten", true), Kernels{});
  EXPECT_EQ(parse_kernels("fused", false), (Kernels{true, true, true, true, XsaImpl::kFusedWide, false, /*clip=*/true,
                                                     false, false, /*norm_regs=*/true}));
  Kernels all_fp8{true, true, true, true, XsaImpl::kFusedWide, /*fp8=*/true, /*clip=*/true, false, false,
                  /*norm_regs=*/true};
  EXPECT_EQ(parse_kernels("fused,fp8", false), all_fp8);
  EXPECT_EQ(parse_kernels("fp8,fused", true), all_fp8);
  EXPECT_EQ(parse_kernels("auto,fp8", true), (Kernels{true, true, true, true, XsaImpl::kFusedWide, true}));
  EXPECT_EQ(parse_kernels("fp8,auto", false), (Kernels{false, false, false, /*loss=*/true, XsaImpl::kOps, true}));
  EXPECT_EQ(parse_kernels("auto,clip", true), (Kernels{true, true, true, true, XsaImpl::kFusedWide, false, true}));
  EXPECT_EQ(parse_kernels("xsa,xsa_wide", false).xsa, XsaImpl::kFusedWide);
  EXPECT_EQ(parse_kernels("xsa_wide,xsa", false).xsa, XsaImpl::kFusedWide);
  EXPECT_EQ(describe(Kernels{}), "aten");
  // fp8_all is fp8 over every block product: it names both, and describes as itself.
  EXPECT_EQ(describe(parse_kernels("fp8,fp8_all", true)), "fp8_all");
  EXPECT_TRUE(parse_kernels("fp8_all", true).fp8);
  // norm_regs is the norm kernel with its register forward: the same.
  EXPECT_EQ(describe(parse_kernels("norm,norm_regs", true)), "norm_regs");
  EXPECT_TRUE(parse_kernels("norm_regs", true).norm);
  for (const char* spec : {"weights", "norm", "norm_regs", "rope", "xsa", "xsa_wide", "loss", "fp8", "fp8_all", "clip",
                           "weights,norm,rope,xsa_wide,loss", "weights,norm,rope,xsa_wide,loss,fp8,clip", "norm,xsa"})
    EXPECT_EQ(describe(parse_kernels(spec, true)), spec);
  try {
    parse_kernels("xsa,wide", true);
    ADD_FAILURE() << "an unknown kernel name was accepted";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("train.kernels: unknown kernel \"wide\""));
  }
}

// The kernel table drives everything that names kernels: every name parses to a
// kernel of its own that describe() names back, the key's help lists each, and the
// error for an unknown name offers them all.
TEST(RunConfig, EveryKernelOfTheTableParsesDescribesAndIsDocumented) {
  const auto names = kernel_names();
  ASSERT_EQ(names.size(), 11u);
  std::set<std::string> described;
  for (const auto& n : names) {
    const auto k = parse_kernels(n, /*cuda=*/true);
    EXPECT_NE(k, Kernels{}) << n;
    EXPECT_EQ(describe(k), n);
    described.insert(describe(k));
    EXPECT_THAT(kernels_help(), HasSubstr(n + " (")) << n;
  }
  EXPECT_EQ(described.size(), names.size());
  try {
    parse_kernels("nope", true);
    ADD_FAILURE() << "an unknown kernel name was accepted";
  } catch (const ConfigError& e) {
    for (const auto& n : names) EXPECT_THAT(e.what(), HasSubstr(n)) << n;
  }
}

// One rule for a key of another attention kind: refused whatever its value, naming the
// kind that owns it. Only the spelling every saved config.json has (xsa_layers and
// xsa_gate at their defaults, in a file) is read as the key left out.
TEST(RunConfig, AKeyOfAnotherKindIsRefusedWhateverItsValue) {
  json sa = kBase;
  sa["model"] = {{"base", "tiny"}, {"attention", "sa"}};
  // Before: xsa_gate at its default trained while out_gate at its default was refused.
  for (const auto& set : {"model.xsa_gate=off", "model.out_gate=headwise", "model.xsa_layers=null"})
    EXPECT_THAT(run_error_of(sa, {set}), HasSubstr("a key of another kind is refused whatever its value")) << set;
  EXPECT_THAT(run_error_of(sa, {"model.xsa_gate=off"}),
              HasSubstr("model.xsa_gate: a key of attention=\"xsa\", so it needs attention=\"xsa\" (attention is "
                        "\"sa\")"));
  EXPECT_THAT(run_error_of(sa, {"model.attention=xsa", "model.out_gate=headwise"}),
              HasSubstr("model.out_gate: a key of attention=\"gated\""));
  // A kind's own keys, and another kind's keys once the override makes the model that kind.
  EXPECT_NO_THROW(load_run_config(write_tmp("sa.json", sa).string(), {"model.attention=xsa", "model.xsa_gate=off"}));
  EXPECT_NO_THROW(load_run_config(write_tmp("sa.json", sa).string(), {"model.attention=gated", "model.out_gate=headwise"}));
  // A saved config.json's spelling still loads; a file's other-kind key away from the saved one does not.
  json saved = sa;
  saved["model"].update({{"xsa_gate", "off"}, {"xsa_layers", nullptr}});
  EXPECT_EQ(load_run_config(write_tmp("saved.json", saved).string()).model.attention, "sa");
  saved["model"]["out_gate"] = "headwise";
  EXPECT_THAT(run_error_of(saved), HasSubstr("model.out_gate: a key of attention=\"gated\""));
}
