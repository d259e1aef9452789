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

const std::vector<std::string>& slurm_keys() {
  static const std::vector<std::string> keys{"time",          "partition",     "account",     "qos",
                                             "nodes",         "ntasks_per_node", "gpus_per_node", "cpus_per_task",
                                             "array_limit",   "signal_s",      "requeue_limit", "extra",
                                             "cluster_nodes"};
  return keys;
}

std::string slurm_keys_text() {
  std::string out;
  for (const auto& k : slurm_keys()) out += (out.empty() ? "" : ", ") + k;
  return out;
}

int64_t read_slurm_count(const json& v, const std::string& where, int64_t least, int64_t most = 1000000) {
  const auto x = schema::read_integer<int64_t>(v, where);
  if (x < least || x > most) schema::bad(where, fmt::format("an integer from {} to {}", least, most), v);
  return x;
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

// Applies one "slurm" object's keys to `s`; `rung` says whether it is a rung's.
void apply_slurm(const json& section, const std::string& where, bool rung, SlurmSettings& s, int64_t* cluster_nodes) {
  if (!section.is_object()) schema::bad(where, "an object of Slurm settings", section);
  for (const auto& [k, v] : section.items()) {
    const std::string at = where + "." + k;
    if (std::find(slurm_keys().begin(), slurm_keys().end(), k) == slurm_keys().end())
      throw ConfigError(fmt::format("{}: unknown key '{}' (known: {})", where, k, slurm_keys_text()));
    if (k == "time") {
      if (!v.is_string()) schema::bad(at, "a time limit as sbatch --time reads it (\"2-00:00:00\", \"90\")", v);
      const auto secs = slurm_time_seconds(v.get<std::string>());
      if (!secs || *secs <= 0)
        schema::bad(at, "a time limit: minutes, M:S, H:M:S, D-H, D-H:M or D-H:M:S, above zero", v);
      s.time = v.get<std::string>();
      s.time_s = *secs;
    } else if (k == "partition" || k == "account" || k == "qos") {
      if (!v.is_string() || v.get<std::string>().empty() ||
          v.get<std::string>().find_first_of(" \t\n'\"\\$`") != std::string::npos)
        schema::bad(at, "a name (no spaces or quotes)", v);
      (k == "partition" ? s.partition : k == "account" ? s.account : s.qos) = v.get<std::string>();
    } else if (k == "extra") {
      if (!v.is_array()) schema::bad(at, "a list of sbatch options, e.g. [\"--constraint=h100\"]", v);
      s.extra.clear();
      for (const auto& line : v) {
        if (!line.is_string() || !line.get<std::string>().starts_with("-") ||
            line.get<std::string>().find('\n') != std::string::npos)
          schema::bad(at, "a list of sbatch options, each one line starting with '-'", line);
        check_extra_line(line.get<std::string>(), at);
        s.extra.push_back(line.get<std::string>());
      }
    } else if (k == "cluster_nodes") {
      if (rung)
        throw ConfigError(at + ": the cluster's nodes are the whole sweep's; set them in the sweep's \"slurm\" section");
      *cluster_nodes = read_slurm_count(v, at, 1);
    } else if (k == "nodes") {
      s.nodes = read_slurm_count(v, at, 1);
    } else if (k == "ntasks_per_node") {
      s.ntasks_per_node = read_slurm_count(v, at, 1);
    } else if (k == "gpus_per_node") {
      s.gpus_per_node = read_slurm_count(v, at, 0);
    } else if (k == "cpus_per_task") {
      s.cpus_per_task = read_slurm_count(v, at, 1);
    } else if (k == "array_limit") {
      s.array_limit = read_slurm_count(v, at, 1);
    } else if (k == "requeue_limit") {
      s.requeue_limit = read_slurm_count(v, at, 0, 1000);
    } else {
      s.signal_s = read_slurm_count(v, at, 1, 65535);  // sbatch's --signal takes at most 0xffff seconds
    }
  }
}

void check_slurm_settings(const SlurmSettings& s, const std::string& where) {
  if (s.time.empty())
    throw ConfigError(where + ".time: required: each job's time limit, as sbatch --time reads it (\"2-00:00:00\")");
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

std::optional<SlurmSpec> read_slurm(const json& spec, const std::string& path) {
  const json no_rungs = json::array();
  const bool ladder = spec.contains("ladder") && spec["ladder"].is_object() && spec["ladder"].contains("rungs") &&
                      spec["ladder"]["rungs"].is_array();
  const auto& rungs = ladder ? spec["ladder"]["rungs"] : no_rungs;
  if (!spec.contains("slurm")) {
    for (size_t i = 0; i < rungs.size(); ++i)
      if (rungs[i].is_object() && rungs[i].contains("slurm"))
        throw ConfigError(fmt::format("{}: ladder.rungs[{}].slurm: overrides the sweep's \"slurm\" section, which it "
                                      "has not (its keys: docs/cluster.md)",
                                      path, i));
    return std::nullopt;
  }
  SlurmSpec out;
  const std::string where = path + ": slurm";
  apply_slurm(spec["slurm"], where, false, out.base, &out.cluster_nodes);
  check_slurm_settings(out.base, where);
  for (size_t i = 0; i < rungs.size(); ++i) {
    auto s = out.base;
    if (rungs[i].is_object() && rungs[i].contains("slurm")) {
      const auto at = fmt::format("{}: ladder.rungs[{}].slurm", path, i);
      apply_slurm(rungs[i]["slurm"], at, true, s, nullptr);
      check_slurm_settings(s, at);
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
