#include "distributed/launch_env.h"

#include "util/error.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <cstdlib>

namespace xsagpt {

namespace {

int64_t parse_int(const EnvLookup& env, const std::string& name, int64_t lo, int64_t hi) {
  const auto v = env(name);
  if (!v) throw ConfigError(name + ": not set");
  int64_t out = 0;
  const char* end = v->data() + v->size();
  auto [p, ec] = std::from_chars(v->data(), end, out);
  if (ec != std::errc() || p != end || v->empty())
    throw ConfigError(fmt::format("{}: expected an integer, got \"{}\"", name, *v));
  if (out < lo || out > hi) throw ConfigError(fmt::format("{}: must be in [{}, {}], got {}", name, lo, hi, out));
  return out;
}

bool is_set(const EnvLookup& env, const std::string& name) { return env(name).has_value(); }

void check_ranks(const LaunchEnv& e, const char* rank_var, const char* world_var) {
  if (e.rank >= e.world_size)
    throw ConfigError(fmt::format("{}: {} is not below {} = {}", rank_var, e.rank, world_var, e.world_size));
}

LaunchEnv from_torchrun(const EnvLookup& env) {
  for (const char* name : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"})
    if (!is_set(env, name))
      throw ConfigError(
          fmt::format("{}: not set, but {} is: launch with torchrun (or set RANK, LOCAL_RANK, "
                      "WORLD_SIZE, MASTER_ADDR and MASTER_PORT together)",
                      name, is_set(env, "RANK") ? "RANK" : "WORLD_SIZE"));
  LaunchEnv e;
  e.launcher = "torchrun";
  e.world_size = parse_int(env, "WORLD_SIZE", 1, 1 << 24);
  e.rank = parse_int(env, "RANK", 0, 1 << 24);
  e.local_rank = parse_int(env, "LOCAL_RANK", 0, 1 << 16);
  check_ranks(e, "RANK", "WORLD_SIZE");
  e.master_addr = *env("MASTER_ADDR");
  e.master_from = "MASTER_ADDR";
  if (e.master_addr.empty()) throw ConfigError("MASTER_ADDR: empty");
  // torchrun's agents: one per node.
  if (is_set(env, "GROUP_WORLD_SIZE")) e.nodes = parse_int(env, "GROUP_WORLD_SIZE", 1, 1 << 24);
  e.master_port = static_cast<int>(parse_int(env, "MASTER_PORT", 1, 65535));
  e.port_from = "MASTER_PORT";
  // Exactly the test PyTorch's env:// rendezvous makes (torch/distributed/rendezvous.py).
  e.agent_store = env("TORCHELASTIC_USE_AGENT_STORE") == std::optional<std::string>("True");
  return e;
}

std::optional<LaunchEnv> from_slurm(const EnvLookup& env) {
  if (!is_set(env, "SLURM_PROCID")) return std::nullopt;
  const bool in_step =
      is_set(env, "SLURM_STEP_ID") || is_set(env, "SLURM_STEPID") || is_set(env, "SLURM_STEP_NUM_TASKS");
  if (!in_step) {
    if (auto n = env("SLURM_NTASKS"); n && *n != "1")
      spdlog::warn(
          "SLURM_NTASKS={} but this process is the batch script, not an srun task: training in this one "
          "process. Start the command with srun to train on all tasks.",
          *n);
    return std::nullopt;
  }
  const std::string world_var = is_set(env, "SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS";
  LaunchEnv e;
  e.launcher = "SLURM";
  e.world_size = parse_int(env, world_var, 1, 1 << 24);
  if (e.world_size == 1) return std::nullopt;
  e.rank = parse_int(env, "SLURM_PROCID", 0, 1 << 24);
  e.local_rank = parse_int(env, "SLURM_LOCALID", 0, 1 << 16);
  check_ranks(e, "SLURM_PROCID", world_var.c_str());
  for (const char* name : {"SLURM_STEP_NUM_NODES", "SLURM_JOB_NUM_NODES", "SLURM_NNODES"})
    if (is_set(env, name)) {
      e.nodes = parse_int(env, name, 1, 1 << 24);
      break;
    }
  if (auto addr = env("MASTER_ADDR"); addr && !addr->empty()) {
    e.master_addr = *addr;
    e.master_from = "MASTER_ADDR";
  } else {
    for (const char* name : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"})
      if (const auto list = env(name)) {
        e.master_addr = first_slurm_host(*list);
        e.master_from = fmt::format("the first host of {}={}", name, *list);
        break;
      }
    if (e.master_from.empty())
      throw ConfigError(
          "MASTER_ADDR: not set, and no SLURM_STEP_NODELIST/SLURM_JOB_NODELIST/SLURM_NODELIST to take "
          "the first host from");
  }
  if (is_set(env, "MASTER_PORT")) {
    e.master_port = static_cast<int>(parse_int(env, "MASTER_PORT", 1, 65535));
    e.port_from = "MASTER_PORT";
  } else if (const auto reserved = env("SLURM_STEP_RESV_PORTS")) {
    // "12000-12003" or "12000,12005": the first port is the step's own on every node.
    const auto first = reserved->substr(0, reserved->find_first_of("-,"));
    int port = 0;
    const auto [p, ec] = std::from_chars(first.data(), first.data() + first.size(), port);
    if (ec != std::errc() || p != first.data() + first.size() || port < 1 || port > 65535)
      throw ConfigError(fmt::format("SLURM_STEP_RESV_PORTS: expected a port range such as 12000-12003, got \"{}\"",
                                    *reserved));
    e.master_port = port;
    e.port_from = "SLURM_STEP_RESV_PORTS";
  } else if (is_set(env, "SLURM_JOB_ID")) {
    e.master_port = static_cast<int>(15000 + parse_int(env, "SLURM_JOB_ID", 0, INT64_MAX) % 15000);
    e.port_from = "SLURM_JOB_ID";
  } else {
    throw ConfigError("MASTER_PORT: not set, and no SLURM_STEP_RESV_PORTS or SLURM_JOB_ID to derive a port from");
  }
  return e;
}

}  // namespace

std::optional<std::string> process_env(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  return v ? std::optional<std::string>(v) : std::nullopt;
}

std::optional<LaunchEnv> read_launch_env(const EnvLookup& env) {
  if (is_set(env, "RANK") || is_set(env, "WORLD_SIZE")) return from_torchrun(env);
  return from_slurm(env);
}

std::vector<std::string> slurm_hostnames(const std::string& nodelist, size_t at_most) {
  auto bad = [&](const std::string& why) {
    return ConfigError(fmt::format("Slurm node list \"{}\": {}", nodelist, why));
  };
  // A group's numbers, as (first, last, width) ranges.
  struct Range {
    uint64_t lo, hi;
    size_t width;
  };
  auto number = [&](const std::string& text, const std::string& group) {
    uint64_t v = 0;
    const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || p != text.data() + text.size())
      throw bad(fmt::format("[{}]: \"{}\" is not a number", group, text));
    return v;
  };
  auto ranges_of = [&](const std::string& group) {
    std::vector<Range> out;
    size_t start = 0;
    while (true) {
      const size_t comma = group.find(',', start);
      const std::string item = group.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (item.empty()) throw bad(fmt::format("[{}]: an empty range", group));
      const size_t dash = item.find('-');
      const std::string lo = item.substr(0, dash), hi = dash == std::string::npos ? lo : item.substr(dash + 1);
      const Range r{number(lo, group), number(hi, group), lo.size()};
      if (r.lo > r.hi) throw bad(fmt::format("[{}]: the range {} runs backwards", group, item));
      out.push_back(r);
      if (comma == std::string::npos) return out;
      start = comma + 1;
    }
  };

  std::vector<std::string> hosts;
  // Items end at a comma or blank outside brackets.
  size_t i = 0;
  while (i < nodelist.size() && hosts.size() < at_most) {
    if (nodelist[i] == ',' || nodelist[i] == ' ' || nodelist[i] == '\t') {
      ++i;
      continue;
    }
    // One item: literal text and bracketed groups, alternating.
    std::vector<std::string> texts{""};
    std::vector<std::vector<Range>> groups;
    for (; i < nodelist.size() && nodelist[i] != ',' && nodelist[i] != ' ' && nodelist[i] != '\t'; ++i) {
      if (nodelist[i] == ']') throw bad("a ']' without its '['");
      if (nodelist[i] != '[') {
        texts.back() += nodelist[i];
        continue;
      }
      const size_t close = nodelist.find(']', i);
      if (close == std::string::npos) throw bad("unbalanced '['");
      const std::string group = nodelist.substr(i + 1, close - i - 1);
      if (group.find('[') != std::string::npos) throw bad("unbalanced '['");
      groups.push_back(ranges_of(group));
      texts.emplace_back();
      i = close;
    }
    // The groups' numbers as nested loops, the first group outermost: an odometer over
    // (range, value) per group.
    std::vector<std::pair<size_t, uint64_t>> at;
    for (const auto& g : groups) at.emplace_back(0, g[0].lo);
    while (hosts.size() < at_most) {
      std::string host = texts[0];
      for (size_t k = 0; k < groups.size(); ++k) {
        const auto digits = std::to_string(at[k].second);
        const size_t width = groups[k][at[k].first].width;
        host += std::string(width > digits.size() ? width - digits.size() : 0, '0') + digits + texts[k + 1];
      }
      hosts.push_back(host);
      size_t k = groups.size();
      for (; k > 0; --k) {
        auto& [r, v] = at[k - 1];
        const auto& g = groups[k - 1];
        if (v < g[r].hi) {
          ++v;
          break;
        }
        if (r + 1 < g.size()) {
          ++r;
          v = g[r].lo;
          break;
        }
        r = 0;
        v = g[0].lo;
      }
      if (k == 0) break;  // every group wrapped round: the item is done
    }
  }
  if (hosts.empty()) throw bad("no host");
  return hosts;
}

std::string first_slurm_host(const std::string& nodelist) { return slurm_hostnames(nodelist, 1).front(); }

}  // namespace xsagpt
