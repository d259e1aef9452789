// `xsagpt train`: one training run from a run config.
#include "cli/commands.h"
#include "cli/options.h"
#include "config/run_config.h"
#include "distributed/process_group.h"
#include "train/signals.h"
#include "train/trainer.h"
#include "util/utf8.h"

#include <spdlog/spdlog.h>

#include <iostream>

namespace xsagpt::cli {

int train(int argc, char** argv) {
  ignore_broken_pipes();  // a console that goes away never kills a run (train/signals.h)
  cxxopts::Options opts("xsagpt train",
                        "Train a GPT with SA or XSA attention from a run config (see configs/runs/ and "
                        "`xsagpt config` for every key).");
  // clang-format off
  opts.add_options()
    ("c,config", "run config JSON file", cxxopts::value<std::string>())
    ("s,set", "override a config value: section.key=value (repeatable), e.g. --set train.lr=3e-4 "
              "--set model.attention=xsa", cxxopts::value<std::vector<std::string>>())
    ("o,out", "run directory (overrides out_dir)", cxxopts::value<std::string>())
    ("r,resume", "'auto' (newest checkpoint in the run directory, or a fresh start if none) or a checkpoint path. "
                 "A path must be the run directory's newest checkpoint, or the directory must hold no run",
     cxxopts::value<std::string>())
    ("overwrite", "discard the run in the run directory and start over; with --resume PATH, discard what the "
                  "directory holds that is not part of that checkpoint's history (another run, or the same "
                  "run's later checkpoints and metrics) and continue from it")
    ("branch-from", "start from another run's checkpoint while the run directory has none of its own: a new run "
                    "whose history is that run's up to the checkpoint (a wsd decay branched off a stable phase, "
                    "docs/training.md); later sessions continue its own checkpoints, as --resume auto; with "
                    "--overwrite, discard what the directory holds and branch again",
     cxxopts::value<std::string>());
  // clang-format on
  const auto parsed = parse_command(opts, argc, argv);
  if (!parsed) return 0;
  const auto& args = *parsed;
  if (!args.count("config")) throw ConfigError("--config: required (e.g. --config configs/runs/cpu-demo-sa.json)");

  std::vector<std::string> overrides;
  if (args.count("set")) overrides = args["set"].as<std::vector<std::string>>();
  if (args.count("out")) {
    const auto out = args["out"].as<std::string>();
    if (const auto bad = utf8::first_invalid(out); bad != out.size()) throw ConfigError("--out: " + not_utf8(out, bad));
    overrides.push_back("out_dir=" + json(out).dump());  // any characters
  }
  auto dist_ctx = make_dist_context();  // single-process unless launched by torchrun/srun
  DistContext& dist = *dist_ctx;
  auto cfg = load_run_config(args["config"].as<std::string>(), overrides, dist.world_size());

  if (dist.is_main()) spdlog::info("watch it live: {}  (or --wandb PROJECT)", track_command(cfg.out_dir));
  TrainOptions topts;
  if (args.count("resume")) topts.resume = args["resume"].as<std::string>();
  topts.overwrite = args.count("overwrite") > 0;
  if (args.count("branch-from")) {  // run/run_start.h refuses it beside --resume PATH
    topts.branch_from = args["branch-from"].as<std::string>();
    if (!args.count("resume") && !topts.overwrite) topts.resume = "auto";
  }
  auto result = train(cfg, topts, dist);
  if (dist.is_main() && result.finished)
    spdlog::info("done: step {}, train loss {:.4f}, val loss {:.4f}", result.step, result.final_train_loss,
                 result.final_val_loss);
  return 0;
}

}  // namespace xsagpt::cli
