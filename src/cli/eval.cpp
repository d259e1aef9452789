// `xsagpt eval`: zero-shot accuracy of one or more checkpoints on tasks in local
// JSON-lines files (eval/task_file.h), scored like lm-evaluation-harness
// (eval/request_split.h, eval/scorer.h, eval/metrics.h). Writes the JSON report
// (eval/report.h) and a table with the models side by side and every variant against
// a baseline.
#include "cli/commands.h"
#include "cli/scoring_options.h"
#include "config/schema.h"
#include "eval/metrics.h"
#include "eval/progress.h"
#include "eval/report.h"
#include "eval/request_split.h"
#include "eval/scorer.h"
#include "eval/task_file.h"
#include "run/run_paths.h"
#include "util/atomic_file.h"
#include "util/device.h"
#include "util/utf8.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <iostream>

namespace xsagpt::cli {

namespace fs = std::filesystem;

namespace {

// A --baseline that names none of the checkpoints' variants is refused before any
// model is scored (hours at the paper's sizes). A variant is NAME= when given, else it
// comes from the run's config.json beside the checkpoint (the model keys cannot change
// on resume, so they are the checkpoint's); for a checkpoint file outside a run
// directory the name is known only once it is loaded, and the report checks it then.
void check_baseline_early(const std::string& baseline, const std::vector<std::string>& checkpoints,
                          const std::vector<std::string>& labels) {
  if (baseline.empty()) return;
  std::vector<std::string> variants;
  for (size_t m = 0; m < checkpoints.size(); ++m) {
    if (!labels[m].empty()) {
      variants.push_back(labels[m]);
      continue;
    }
    const fs::path path = checkpoints[m];
    const auto config =
        read_run_file(RunPaths(fs::is_directory(path) ? path : path.parent_path().parent_path()).config);
    if (!config.is_object() || !config.value("model", json()).is_object()) return;
    variants.push_back(eval::variant_of(config["model"]));
  }
  if (std::find(variants.begin(), variants.end(), baseline) == variants.end())
    throw ConfigError(
        fmt::format("--baseline: '{}' is none of the models' variants ({})", baseline, fmt::join(variants, ", ")));
}

}  // namespace

int eval(int argc, char** argv) {
  cxxopts::Options opts(
      "xsagpt eval",
      "Zero-shot accuracy of checkpoints on local tasks, computed as lm-evaluation-harness 0.4.13 computes it.\n"
      "A task file holds one item per line, as lm-eval renders a document (docs/evaluation.md):\n"
      "  {\"context\": str, \"endings\": [str, ...], \"label\": int}        multiple choice (ARC, HellaSwag, ...)\n"
      "  {\"contexts\": [str, ...], \"continuation\": str, \"label\": int}  partial scoring (WinoGrande)\n"
      "  {\"context\": str, \"continuation\": str}                       greedy loglikelihood (LAMBADA)\n"
      "plus \"name\" (the task; default: the file's stem) and \"target_delimiter\" (default \" \"). The context\n"
      "has no trailing space and the endings no leading one: choice k is scored as log p(target_delimiter +\n"
      "ending | context), trailing context whitespace moved to the continuation; a file in the old form (\" Paris\")\n"
      "is refused. Per task: acc (highest summed log-probability; for greedy items: every continuation token\n"
      "is the argmax), acc_norm (the same after dividing by the choice's length in characters, without the\n"
      "delimiter), each with lm-eval's standard error (sample std / sqrt(n)), and n. Several checkpoints are\n"
      "compared side by side, every variant against the baseline: a checkpoint's variant is NAME when given as\n"
      "NAME=PATH, else its attention keys (\"xsa\", \"xsa layers=last 3\", \"xsa gate=sa\"); models of one variant\n"
      "and config with different train.seed are its seeds, paired with the baseline's by seed (mean difference,\n"
      "95% t interval, paired t-test p and p Holm-adjusted across the variants; from 3 baseline seeds, the\n"
      "baseline's own sd over them; docs/evaluation.md).");
  // clang-format off
  opts.add_options()
    ("checkpoints", "checkpoint files or run directories (their newest checkpoint), each optionally NAME=PATH "
                    "to name its variant", cxxopts::value<std::vector<std::string>>())
    ("baseline", "the variant every other one is compared with (default: the first checkpoint's); a name that none of the "
                 "checkpoints has is refused before any is scored",
     cxxopts::value<std::string>()->default_value(""))
    ("t,task", "task file(s), JSON lines (repeat the option, or separate files with commas)",
     cxxopts::value<std::vector<std::string>>())
    ("o,out", "write the JSON report here (the table then goes to stdout); default: JSON to stdout, table to stderr",
     cxxopts::value<std::string>())
    ("limit", "use only the first N items of each task (0: all)", cxxopts::value<int64_t>()->default_value("0"));
  // clang-format on
  add_scoring_options(opts);
  opts.parse_positional({"checkpoints"});
  opts.positional_help("[NAME=]CHECKPOINT... --task FILE.jsonl");
  const auto parsed = parse_command(opts, argc, argv);
  if (!parsed) return 0;
  const auto& args = *parsed;
  if (!args.count("checkpoints")) throw ConfigError("CHECKPOINT: give at least one checkpoint file or run directory");
  if (!args.count("task")) throw ConfigError("--task: required (a JSON-lines task file)");
  if (args["limit"].as<int64_t>() < 0) throw ConfigError("--limit: must be >= 0 (0: all items)");
  const auto scoring = read_scoring_options(args);

  // Everything that can be wrong with the input is found before a model is loaded.
  std::vector<fs::path> files;
  for (const auto& arg : args["task"].as<std::vector<std::string>>())
    for (size_t start = 0; start <= arg.size();) {  // "a.jsonl,b.jsonl" is two files
      const size_t comma = std::min(arg.find(',', start), arg.size());
      if (comma > start) files.emplace_back(arg.substr(start, comma - start));
      start = comma + 1;
    }
  if (files.empty()) throw ConfigError("--task: no file named");
  const auto tasks = eval::read_task_files(files, args["limit"].as<int64_t>());
  const auto device = resolve_device(scoring.device, "--device");
  auto tok = Gpt2Tokenizer::load(scoring.vocab);

  // The token requests do not depend on the model: one per choice, task by task.
  // What lm-eval would refuse is refused here, naming the line, before a model is loaded.
  std::vector<eval::TokenRequest> reqs;
  std::vector<std::string> req_where, task_names;
  for (const auto& t : tasks) {
    task_names.push_back(t.name);
    for (const auto& item : t.items) {
      const auto pairs = item.requests();
      for (size_t k = 0; k < pairs.size(); ++k) {
        const auto where = pairs.size() > 1 ? fmt::format("{}: choice {}", item.where, k) : item.where;
        try {
          reqs.push_back(eval::split_pair(tok, pairs[k].first, pairs[k].second));
        } catch (const eval::SplitError& e) {
          throw ConfigError(where + ": " + e.what());
        }
        req_where.push_back(where);
      }
    }
  }
  size_t n_items = 0;
  for (const auto& t : tasks) n_items += t.items.size();
  spdlog::info("{} task(s), {} items, {} endings to score", tasks.size(), n_items, reqs.size());

  // NAME=PATH names a checkpoint's variant; a path that exists as given is never split
  // (sweep point directories hold '=': model.attention=xsa).
  std::vector<std::string> checkpoints, labels;
  for (const auto& arg : args["checkpoints"].as<std::vector<std::string>>()) {
    const auto eq = arg.find('=');
    const bool named = eq != std::string::npos && eq > 0 && !fs::exists(arg);
    checkpoints.push_back(named ? arg.substr(eq + 1) : arg);
    labels.push_back(named ? arg.substr(0, eq) : "");
  }
  check_baseline_early(args["baseline"].as<std::string>(), checkpoints, labels);
  std::vector<eval::ModelEval> models;
  for (size_t m = 0; m < checkpoints.size(); ++m) {
    auto trained = load_gpt2_model(checkpoints[m], device, tok, scoring.precision, /*compact_ok=*/false);
    eval::Progress bar(fmt::format("[{}/{}] {}", m + 1, checkpoints.size(), checkpoints[m]));
    std::vector<eval::Score> scores;
    try {
      scores = eval::score_requests(trained.model, reqs, scoring.score,
                                    [&](size_t done, size_t total) { bar.update(done, total); });
    } catch (const eval::RequestError& e) {
      bar.finish();
      throw ConfigError(req_where[e.index] + ": " + e.what());
    }
    bar.finish();
    eval::ModelEval me;
    // The report is JSON, which holds UTF-8 only: a path's other bytes are shown as \xNN.
    me.checkpoint = utf8::escape_invalid(checkpoints[m]);
    me.label = utf8::escape_invalid(labels[m]);
    me.file = utf8::escape_invalid(trained.file.string());
    me.step = trained.step;
    me.model = trained.config["model"];
    me.seed = trained.config.contains("train") ? trained.config["train"].value("seed", json(nullptr)) : json(nullptr);
    size_t k = 0;
    for (const auto& t : tasks) {
      std::vector<std::vector<eval::ChoiceScore>> per_item;
      for (const auto& item : t.items) {
        per_item.emplace_back();
        for (size_t e = 0; e < item.requests().size(); ++e, ++k)
          per_item.back().push_back({scores[k].logprob, scores[k].is_greedy});
      }
      me.results.push_back(eval::task_metrics(t, per_item));
    }
    models.push_back(std::move(me));
  }

  const auto report = eval::eval_report(task_names, models, args["baseline"].as<std::string>());
  const auto table = eval::eval_table(report);
  if (args.count("out")) {
    write_file_atomic(args["out"].as<std::string>(), report.dump(2) + "\n");
    std::cout << table;
    spdlog::info("wrote {}", args["out"].as<std::string>());
  } else {
    std::cout << report.dump(2) << "\n";
    std::cerr << table;
  }
  return 0;
}

}  // namespace xsagpt::cli
