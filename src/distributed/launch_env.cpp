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
  if (e.master_addr.empty()) throw ConfigError("MASTER_ADDR: empty");
  e.master_port = static_cast<int>(parse_int(env, "MASTER_PORT", 1, 65535));
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
  if (auto addr = env("MASTER_ADDR"); addr && !addr->empty()) {
    e.master_addr = *addr;
  } else {
    std::optional<std::string> list;
    for (const char* name : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"})
      if ((list = env(name))) break;
    if (!list)
      throw ConfigError(
          "MASTER_ADDR: not set, and no SLURM_STEP_NODELIST/SLURM_JOB_NODELIST/SLURM_NODELIST to take "
          "the first host from");
    e.master_addr = first_slurm_host(*list);
  }
  if (is_set(env, "MASTER_PORT")) {
    e.master_port = static_cast<int>(parse_int(env, "MASTER_PORT", 1, 65535));
  } else if (is_set(env, "SLURM_JOB_ID")) {
    e.master_port = static_cast<int>(15000 + parse_int(env, "SLURM_JOB_ID", 0, INT64_MAX) % 15000);
  } else {
    throw ConfigError("MASTER_PORT: not set, and no SLURM_JOB_ID to derive a port from");
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

std::string first_slurm_host(const std::string& nodelist) {
  // The first comma outside brackets ends the first host expression.
  size_t end = 0;
  for (int depth = 0; end < nodelist.size(); ++end) {
    if (nodelist[end] == '[') ++depth;
    if (nodelist[end] == ']') --depth;
    if (nodelist[end] == ',' && depth == 0) break;
  }
  const std::string expr = nodelist.substr(0, end);
  // Each bracketed range list contributes its first number, zero padding kept.
  std::string host;
  for (size_t i = 0; i < expr.size(); ++i) {
    if (expr[i] != '[') {
      host += expr[i];
      continue;
    }
    const size_t close = expr.find(']', i);
    if (close == std::string::npos) throw ConfigError("SLURM node list \"" + nodelist + "\": unbalanced '['");
    const std::string first = expr.substr(i + 1, expr.find_first_of(",-]", i + 1) - i - 1);
    if (first.empty()) throw ConfigError("SLURM node list \"" + nodelist + "\": empty range");
    host += first;
    i = close;
  }
  if (host.empty()) throw ConfigError("SLURM node list \"" + nodelist + "\": no host");
  return host;
}

}  // namespace xsagpt
