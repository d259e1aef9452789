// `xsagpt score`: the log-likelihood engine as a command. Reads JSON-lines requests
// (eval/request_lines.h) from a file or stdin and writes one JSON line per request
// to stdout, in order. Requests are read in groups (up to --group lines, or up to
// an empty line, or the end of the input); each group is scored in batched passes
// and its answers are written and flushed before the next is read, so a process
// kept alive by the lm-evaluation-harness bridge (scripts/eval/lm_eval_xsagpt.py)
// answers each group it sends, ended by an empty line.
#include "cli/commands.h"
#include "cli/scoring_options.h"
#include "config/schema.h"
#include "eval/request_lines.h"
#include "eval/request_split.h"
#include "eval/scorer.h"
#include "util/device.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <fstream>
#include <iostream>

namespace xsagpt::cli {

namespace {

struct Session {
  GPT& model;
  const Gpt2Tokenizer& tok;
  eval::ScoreOptions opts;
  bool rolling_only = false, show_tokens = false;
  int64_t tokens_fed = 0;  // positions of the model's input windows, padding not counted
  double seconds = 0;      // answering (splitting, scoring, writing), model loading and waiting not counted

  static json ids(const std::vector<int64_t>& v) { return json(v); }

  void answer(const std::vector<eval::LineRequest>& lines, std::ostream& out) {
    const auto start = std::chrono::steady_clock::now();
    const int64_t block = model->cfg.block_size;
    std::vector<eval::TokenRequest> reqs;
    std::vector<std::pair<size_t, size_t>> span(lines.size());  // [first, first+count) in reqs
    for (size_t i = 0; i < lines.size(); ++i) {
      const auto& l = lines[i];
      span[i].first = reqs.size();
      if (l.kind == eval::LineRequest::kPair) {
        if (rolling_only)
          throw ConfigError(l.where + ": --rolling expects {\"text\": str} lines, got a context/continuation pair");
        try {
          reqs.push_back(eval::split_pair(tok, l.context, l.continuation));
        } catch (const eval::SplitError& e) {
          throw ConfigError(l.where + ": " + e.what());
        }
      } else if (l.kind == eval::LineRequest::kRolling) {
        auto enc = tok.encode(l.text, SpecialTokens::kAllowed);
        auto windows = eval::rolling_windows({enc.begin(), enc.end()}, tok.eot_id(), block);
        reqs.insert(reqs.end(), windows.begin(), windows.end());
      } else if (rolling_only) {
        throw ConfigError(l.where + ": --rolling expects {\"text\": str} lines, got a generation request");
      } else if (l.generate.max_new_tokens > block) {
        // More would push the whole prompt out of the window: text continued from nothing.
        throw ConfigError(
            fmt::format("{}: \"max_new_tokens\": expected 1..{} (the model's context window, "
                        "block_size), got {}",
                        l.where, block, l.generate.max_new_tokens));
      }
      span[i].second = reqs.size() - span[i].first;
    }
    std::vector<eval::Score> scores;
    try {
      scores = eval::score_requests(model, reqs, opts);
    } catch (const eval::RequestError& e) {
      size_t line = 0;
      while (line + 1 < lines.size() && span[line + 1].first <= e.index) ++line;
      throw ConfigError(lines[line].where + ": " + e.what());
    }
    for (const auto& r : reqs)
      if (!r.continuation.empty())
        tokens_fed += std::min<int64_t>(static_cast<int64_t>(r.context.size() + r.continuation.size()), block + 1) - 1;
    for (size_t i = 0; i < lines.size(); ++i) {
      const auto& l = lines[i];
      json o;
      if (l.kind == eval::LineRequest::kGenerate) {
        auto g = eval::generate_until(model, tok, l.generate);
        o = {{"text", g.text}, {"n_tokens", g.n_tokens}};
      } else {
        double logprob = 0;
        bool greedy = true;
        int64_t n = 0;
        json windows = json::array();
        for (size_t k = span[i].first; k < span[i].first + span[i].second; ++k) {
          logprob += scores[k].logprob;
          greedy = greedy && scores[k].is_greedy;
          n += scores[k].n_tokens;
          if (show_tokens)
            windows.push_back({{"context_ids", ids(reqs[k].context)}, {"continuation_ids", ids(reqs[k].continuation)}});
        }
        o = {{"logprob", logprob}, {"is_greedy", greedy}, {"n_tokens", n}};
        if (show_tokens) {
          if (l.kind == eval::LineRequest::kPair) {
            o["context_ids"] = windows[0]["context_ids"];
            o["continuation_ids"] = windows[0]["continuation_ids"];
          } else {
            o["windows"] = windows;
          }
        }
      }
      out << o.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
    }
    out.flush();
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
};

}  // namespace

int score(int argc, char** argv) {
  cxxopts::Options opts(
      "xsagpt score",
      "Log-likelihoods from a checkpoint (GPT-2 BPE), split and truncated as lm-evaluation-harness does.\n"
      "Input: JSON lines, each one request:\n"
      "  {\"context\": str, \"continuation\": str}   log p(continuation | context)\n"
      "  {\"text\": str}                           log p(text) over rolling windows (loglikelihood_rolling)\n"
      "  {\"prompt\": str, \"until\": [str], \"max_new_tokens\": int, \"temperature\": float, \"seed\": int}\n"
      "                                          generated text up to the first stop string (generate_until);\n"
      "                                          max_new_tokens 1..block_size (default min(256, block_size)),\n"
      "                                          temperature 0 (greedy, the default) or > 0\n"
      "Output: one JSON line per request, in order: {\"logprob\": float (natural log), \"is_greedy\": bool,\n"
      "\"n_tokens\": int (continuation tokens scored)}, or {\"text\": str, \"n_tokens\": int} for a prompt.\n"
      "Trailing whitespace of a context moves to the continuation; a context longer than the model's\n"
      "window loses tokens on the left. A continuation with no tokens of its own (empty, or merged by BPE\n"
      "into the context: \"hell\" + \"o\") is refused, naming the line, as lm-eval refuses it.\n"
      "An empty line answers the lines read so far (for a process kept alive by a client).");
  // clang-format off
  opts.add_options()
    ("checkpoint", "checkpoint file, or a run directory (its newest checkpoint)", cxxopts::value<std::string>())
    ("file", "JSON-lines input (default: stdin)", cxxopts::value<std::string>()->default_value("-"))
    ("rolling", "every line is {\"text\": str}, scored whole (perplexity)")
    ("tokens", "also print the token ids of each request as scored (context_ids/continuation_ids, or windows)")
    ("group", "lines read before answering (an empty line answers earlier)",
     cxxopts::value<int64_t>()->default_value("4096"));
  // clang-format on
  add_scoring_options(opts);
  opts.parse_positional({"checkpoint", "file"});
  opts.positional_help("CHECKPOINT [FILE]");
  const auto parsed = parse_command(opts, argc, argv);
  if (!parsed) return 0;
  const auto& args = *parsed;
  if (!args.count("checkpoint")) throw ConfigError("--checkpoint: required (a checkpoint file or a run directory)");
  const int64_t group = args["group"].as<int64_t>();
  if (group < 1) throw ConfigError("--group: must be >= 1");
  const auto scoring = read_scoring_options(args);

  const auto file = args["file"].as<std::string>();
  std::ifstream fin;
  if (file != "-") {
    fin.open(file, std::ios::binary);
    if (!fin) throw ConfigError(file + ": cannot open");
  }
  std::istream& in = file == "-" ? std::cin : fin;
  const std::string name = file == "-" ? "<stdin>" : file;

  auto tok = Gpt2Tokenizer::load(scoring.vocab);
  auto trained = load_gpt2_model(args["checkpoint"].as<std::string>(), resolve_device(scoring.device, "--device"), tok,
                                 scoring.precision, /*compact_ok=*/true);
  Session s{trained.model, tok, scoring.score, args.count("rolling") > 0, args.count("tokens") > 0};
  spdlog::info("{} (step {}): scoring requests from {}", trained.file.string(), trained.step, name);

  std::vector<eval::LineRequest> lines;
  std::string line;
  size_t line_no = 0, answered = 0;
  auto flush = [&] {
    if (lines.empty()) return;
    s.answer(lines, std::cout);
    answered += lines.size();
    lines.clear();
  };
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) {
      flush();
      continue;
    }
    lines.push_back(eval::parse_request_line(line, fmt::format("{}:{}", name, line_no)));
    if (static_cast<int64_t>(lines.size()) >= group) flush();
  }
  flush();
  // scripts/bench/bench_score.py reads this line.
  spdlog::info("answered {} request(s): {} tokens through the model in {:.3f} s, {:.0f} tokens/s", answered,
               s.tokens_fed, s.seconds, s.seconds > 0 ? static_cast<double>(s.tokens_fed) / s.seconds : 0.0);
  return 0;
}

}  // namespace xsagpt::cli
