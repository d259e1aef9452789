// The "slurm" section read and checked (see slurm_spec.h).
#include "sweep/slurm_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

namespace xsagpt {

namespace {

std::optional<int64_t> slurm_whole_number(const std::string& s) {
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoll(s);
}

std::vector<std::string> split_on(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t at; (at = s.find(sep, start)) != std::string::npos; start = at + 1) parts.push_back(s.substr(start, at - start));
  parts.push_back(s.substr(start));
  return parts;
}

void check_count(int64_t x, const std::string& where, int64_t least, int64_t most = 1000000) {
  if (x < least || x > most) schema::bad(where, fmt::format("an integer from {} to {}", least, most), json(x));
}

// The sbatch options the scripts set themselves, which an "extra" line must not set again
// (sbatch takes the last value of an option, so an extra line would win): each with its
// short form (0: none) and why the jobs depend on it.
struct OwnedOption {
  const char* name;
  char letter;
  const char* why;
};
constexpr OwnedOption kOwnedOptions[] = {
    {"job-name", 'J', "--submit finds the sweep's queued points by the job name"},
    {"array", 'a', "the array's task ids are its points"},
    {"signal", 0, "the signal before the time limit checkpoints the point (slurm.signal_s)"},
    {"time", 't', "the time limit is checked against the time between checkpoints (slurm.time)"},
    {"output", 'o', "the jobs' output goes to OUT/slurm/logs, appended across requeues"},
    {"error", 'e', "the jobs' output goes to OUT/slurm/logs, appended across requeues"},
    {"open-mode", 0, "a requeued task appends to its log"},
    {"requeue", 0, "a task requeues itself at its time limit"},
    {"no-requeue", 0, "a task requeues itself at its time limit"},
    {"chdir", 'D', "relative paths are read from the folder --slurm ran in"},
    {"nodes", 'N', "a point's ranks are slurm.nodes x slurm.ntasks_per_node, checked against its batch"},
    {"ntasks", 'n', "a point's ranks are slurm.nodes x slurm.ntasks_per_node, checked against its batch"},
    {"ntasks-per-node", 0, "a point's ranks are slurm.nodes x slurm.ntasks_per_node, checked against its batch"},
    {"cpus-per-task", 'c', "use slurm.cpus_per_task"},
    {"gpus-per-node", 0, "use slurm.gpus_per_node"},
    {"partition", 'p', "use slurm.partition"},
    {"account", 'A', "use slurm.account"},
    {"qos", 'q', "use slurm.qos"},
    {"wrap", 0, "it would replace the batch script"},
    {"wait", 'W', "--submit would wait for each array to end"},
};
// sbatch's options whose names begin another one's above: an exact name wins over a prefix.
constexpr std::string_view kWholeOptions[] = {"gpus"};
// sbatch's short options that take a value, which ends a group of short options ("-Cgpu").
constexpr std::string_view kShortWithValue = "AabcCDdeFGiJLMmNnopqStwx";

// sbatch's words of one #SBATCH line: split at blanks outside quotes, up to a '#'.
std::vector<std::string> sbatch_words(const std::string& line) {
  std::vector<std::string> words;
  std::string word;
  char quote = 0;
  bool in_word = false;
  for (const char c : line) {
    if (quote) {
      if (c == quote) quote = 0;
      else word += c;
    } else if (c == '"' || c == '\'') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else if (c == '#' && !in_word) {
      break;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

// Refuses an "extra" line that sets an option the scripts own: by its long name, a prefix
// of it (getopt takes an unambiguous prefix), or its letter, alone or in a group of flags.
void check_extra_line(const std::string& line, const std::string& where) {
  auto refuse = [&](const OwnedOption& o, const std::string& word) {
    throw ConfigError(fmt::format("{}: \"{}\": {} sets --{}, which the batch scripts set themselves ({}); remove it",
                                  where, line, word, o.name, o.why));
  };
  for (const auto& word : sbatch_words(line)) {
    if (word.starts_with("--")) {
      const auto name = word.substr(2, word.find('=') == std::string::npos ? std::string::npos : word.find('=') - 2);
      if (name.empty() || std::find(std::begin(kWholeOptions), std::end(kWholeOptions), name) != std::end(kWholeOptions))
        continue;
      for (const auto& o : kOwnedOptions)
        if (std::string_view(o.name).starts_with(name)) refuse(o, word);
    } else if (word.size() > 1 && word[0] == '-') {
      for (size_t i = 1; i < word.size(); ++i) {
        for (const auto& o : kOwnedOptions)
          if (o.letter == word[i]) refuse(o, word);
        if (kShortWithValue.find(word[i]) != std::string_view::npos) break;
      }
    }
  }
}


// What the values of a "slurm" object as read (`section`, over `s`) must be.
void check_slurm_values(const json& section, const std::string& where, SlurmSettings& s) {
  if (section.contains("time")) {
    const auto secs = slurm_time_seconds(s.time);
    if (!secs || *secs <= 0)
      schema::bad(where + ".time", "a time limit: minutes, M:S, H:M:S, D-H, D-H:M or D-H:M:S, above zero",
                  section["time"]);
    s.time_s = *secs;
  }
  for (const char* k : {"partition", "account", "qos"})
    if (section.contains(k)) {
      const auto& name = section[k].get<std::string>();
      if (name.empty() || name.find_first_of(" \t\n'\"\\$`") != std::string::npos)
        schema::bad(where + "." + k, "a name (no spaces or quotes)", section[k]);
    }
  for (const auto& line : s.extra)
    if (!line.starts_with("-") || line.find('\n') != std::string::npos)
      schema::bad(where + ".extra", "a list of sbatch options, each one line starting with '-'", json(line));
  for (const auto& line : s.extra) check_extra_line(line, where + ".extra");
  check_count(s.nodes, where + ".nodes", 1);
  check_count(s.ntasks_per_node, where + ".ntasks_per_node", 1);
  check_count(s.gpus_per_node, where + ".gpus_per_node", 0);
  check_count(s.cpus_per_task, where + ".cpus_per_task", 1);
  check_count(s.array_limit, where + ".array_limit", 0);
  check_count(s.signal_s, where + ".signal_s", 1, 65535);  // sbatch's --signal takes at most 0xffff seconds
  check_count(s.requeue_limit, where + ".requeue_limit", 0, 1000);
  if (s.signal_s >= s.time_s)
    throw ConfigError(fmt::format("{}.signal_s: {} s before a time limit of {} s ({}) leaves no time to train", where,
                                  s.signal_s, s.time_s, s.time));
}

}  // namespace

std::optional<int64_t> slurm_time_seconds(const std::string& text) {
  std::string rest = text;
  int64_t days = 0;
  const bool has_days = rest.find('-') != std::string::npos;
  if (has_days) {
    const auto d = slurm_whole_number(rest.substr(0, rest.find('-')));
    if (!d) return std::nullopt;
    days = *d;
    rest = rest.substr(rest.find('-') + 1);
  }
  const auto parts = split_on(rest, ':');
  std::vector<int64_t> n;
  for (const auto& p : parts) {
    const auto x = slurm_whole_number(p);
    if (!x) return std::nullopt;
    n.push_back(*x);
  }
  int64_t secs = 0;
  if (has_days) {  // D-H, D-H:M, D-H:M:S
    if (n.size() > 3) return std::nullopt;
    secs = n[0] * 3600 + (n.size() > 1 ? n[1] * 60 : 0) + (n.size() > 2 ? n[2] : 0);
  } else if (n.size() == 1) {  // M
    secs = n[0] * 60;
  } else if (n.size() == 2) {  // M:S
    secs = n[0] * 60 + n[1];
  } else if (n.size() == 3) {  // H:M:S
    secs = n[0] * 3600 + n[1] * 60 + n[2];
  } else {
    return std::nullopt;
  }
  return days * 86400 + secs;
}

std::optional<SlurmSpec> read_slurm(const SweepFileSection& file, const std::string& path) {
  // A rung's own "slurm" is read here, over the sweep's (the ladder's section, its rungs
  // a list, was read before: sweep/grid.h).
  const json rungs = file.ladder.is_null() ? json::array() : file.ladder["rungs"];
  if (file.slurm.is_null()) {
    for (size_t i = 0; i < rungs.size(); ++i)
      if (rungs[i].is_object() && rungs[i].contains("slurm"))
        throw ConfigError(fmt::format("{}: ladder.rungs[{}].slurm: overrides the sweep's \"slurm\" section, which it "
                                      "has not (its keys: docs/cluster.md)",
                                      path, i));
    return std::nullopt;
  }
  SlurmSection section;
  const std::string where = path + ": slurm";
  file_keys::read(file.slurm, section, where);
  check_slurm_values(file.slurm, where, section.job);
  if (section.cluster_nodes) check_count(*section.cluster_nodes, where + ".cluster_nodes", 1);
  SlurmSpec out{section.job, {}, section.cluster_nodes.value_or(0)};
  for (size_t i = 0; i < rungs.size(); ++i) {
    auto s = out.base;
    if (rungs[i].is_object() && rungs[i].contains("slurm")) {
      const auto at = fmt::format("{}: ladder.rungs[{}].slurm", path, i);
      const auto& own = rungs[i]["slurm"];
      if (own.is_object() && own.contains("cluster_nodes"))
        throw ConfigError(at +
                          ".cluster_nodes: the cluster's nodes are the whole sweep's; set them in the sweep's "
                          "\"slurm\" section");
      file_keys::read(own, s, at, ".", /*overrides=*/true);
      check_slurm_values(own, at, s);
    }
    out.rungs.push_back(std::move(s));
  }
  // The dry run packs the jobs on the cluster's nodes: one larger than it would never start.
  for (size_t i = 0; i <= out.rungs.size(); ++i) {
    const auto& s = i < out.rungs.size() ? out.rungs[i] : out.base;
    if (out.cluster_nodes > 0 && s.nodes > out.cluster_nodes)
      throw ConfigError(fmt::format("{}.cluster_nodes: {} node(s), fewer than the {} a job of {} asks for", where,
                                    out.cluster_nodes, s.nodes,
                                    i < out.rungs.size() ? fmt::format("ladder.rungs[{}]", i) : "the sweep"));
  }
  return out;
}

}  // namespace xsagpt
