// `xsagpt eval`: multiple-choice accuracy of one or more checkpoints on tasks in
// local JSON-lines files (eval/task_file.h), scored like lm-evaluation-harness
// (eval/request_split.h, eval/scorer.h, eval/metrics.h). Writes the JSON report
// (eval/report.h) and a table with the models side by side and XSA - SA.
#include "cli/commands.h"
#include "config/schema.h"
#include "eval/metrics.h"
#include "eval/progress.h"
#include "eval/report.h"
#include "eval/request_split.h"
#include "eval/scorer.h"
#include "eval/task_file.h"
#include "cli/scoring_options.h"
#include "util/device.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <fstream>
#include <iostream>

namespace xsagpt::cli {

namespace fs = std::filesystem;

// Writes through a temporary file renamed over the target, so an interrupted run
// never leaves half a report where a good one was.
static void write_atomically(const fs::path& path, const std::string& text) {
  auto tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw ConfigError(path.string() + ": cannot write");
    out << text;
    out.flush();
    if (!out) throw ConfigError(path.string() + ": write failed");
  }
  fs::rename(tmp, path);
}

int eval(int argc, char** argv) {
  cxxopts::Options opts(
      "xsagpt eval",
      "Multiple-choice accuracy of checkpoints on local tasks, as lm-evaluation-harness scores them.\n"
      "A task file holds one item per line: {\"context\": str, \"endings\": [str, ...], \"label\": int,\n"
      "\"name\": str (optional; default: the file's stem)}. Each ending is scored as written as the\n"
      "continuation of the context (so \" Paris\", with its space). Per task: acc (highest summed\n"
      "log-probability), acc_norm (the same divided by the ending's length in characters) and n.\n"
      "Several checkpoints are compared side by side, with XSA - SA for SA/XSA pairs.");
  opts.add_options()
    ("checkpoints", "checkpoint files or run directories (their newest checkpoint)",
     cxxopts::value<std::vector<std::string>>())
    ("t,task", "task file(s), JSON lines (repeat the option or separate with commas)",
     cxxopts::value<std::vector<std::string>>())
    ("o,out", "write the JSON report here (the table then goes to stdout); default: JSON to stdout, table to stderr",
     cxxopts::value<std::string>())
    ("limit", "use only the first N items of each task (0: all)", cxxopts::value<int64_t>()->default_value("0"));
  add_scoring_options(opts);
  opts.add_options()("h,help", "show this help");
  opts.parse_positional({"checkpoints"});
  opts.positional_help("CHECKPOINT... --task FILE.jsonl");
  auto args = opts.parse(argc, argv);
  if (args.count("help")) { std::cout << opts.help() << "\n"; return 0; }
  if (!args.count("checkpoints")) throw ConfigError("CHECKPOINT: give at least one checkpoint file or run directory");
  if (!args.count("task")) throw ConfigError("--task: required (a JSON-lines task file)");
  if (!args.unmatched().empty()) throw ConfigError("unexpected argument '" + args.unmatched()[0] + "'");
  if (args["limit"].as<int64_t>() < 0) throw ConfigError("--limit: must be >= 0 (0: all items)");
  const auto scoring = read_scoring_options(args);

  // Everything that can be wrong with the input is found before a model is loaded.
  std::vector<fs::path> files;
  for (const auto& f : args["task"].as<std::vector<std::string>>()) files.emplace_back(f);
  const auto tasks = eval::read_task_files(files, args["limit"].as<int64_t>());
  const auto device = resolve_device(scoring.device, "--device");
  auto tok = Gpt2Tokenizer::load(scoring.vocab);

  // The token requests do not depend on the model: one per ending, task by task.
  std::vector<eval::TokenRequest> reqs;
  std::vector<std::string> req_where, task_names;
  for (const auto& t : tasks) {
    task_names.push_back(t.name);
    for (const auto& item : t.items)
      for (size_t k = 0; k < item.endings.size(); ++k) {
        reqs.push_back(eval::split_pair(tok, item.context, item.endings[k]));
        req_where.push_back(fmt::format("{}: ending {}", item.where, k));
      }
  }
  size_t n_items = 0;
  for (const auto& t : tasks) n_items += t.items.size();
  spdlog::info("{} task(s), {} items, {} endings to score", tasks.size(), n_items, reqs.size());

  const auto checkpoints = args["checkpoints"].as<std::vector<std::string>>();
  std::vector<eval::ModelEval> models;
  for (size_t m = 0; m < checkpoints.size(); ++m) {
    auto trained = load_gpt2_model(checkpoints[m], device, tok);
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
    me.checkpoint = checkpoints[m];
    me.file = trained.file.string();
    me.step = trained.step;
    me.model = trained.config["model"];
    size_t k = 0;
    for (const auto& t : tasks) {
      std::vector<std::vector<double>> lp;
      for (const auto& item : t.items) {
        lp.emplace_back();
        for (size_t e = 0; e < item.endings.size(); ++e) lp.back().push_back(scores[k++].logprob);
      }
      me.results.push_back(eval::multiple_choice_metrics(t, lp));
    }
    models.push_back(std::move(me));
  }

  const auto report = eval::eval_report(task_names, models);
  const auto table = eval::eval_table(report);
  if (args.count("out")) {
    write_atomically(args["out"].as<std::string>(), report.dump(2) + "\n");
    std::cout << table;
    spdlog::info("wrote {}", args["out"].as<std::string>());
  } else {
    std::cout << report.dump(2) << "\n";
    std::cerr << table;
  }
  return 0;
}

}  // namespace xsagpt::cli
