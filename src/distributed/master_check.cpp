// The master address and port checked before any collective (see master_check.h).
#include "distributed/master_check.h"

#include "util/error.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <utility>

namespace xsagpt {

namespace {

std::string host_name_here() {
  char name[256] = {};
  return gethostname(name, sizeof(name) - 1) == 0 ? std::string(name) : std::string("this host");
}

// The addresses `name` resolves to here, as text; throws with getaddrinfo's reason.
std::set<std::string> resolve_master(const LaunchEnv& env) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(env.master_addr.c_str(), nullptr, &hints, &found);
  if (rc != 0)
    throw ConfigError(fmt::format(
        "rank {} of {}: the master address \"{}\" ({}) does not resolve on {}: {}; every rank must reach rank 0 "
        "there: set MASTER_ADDR to a name or address every node resolves",
        env.rank, env.world_size, env.master_addr, env.master_from, host_name_here(), gai_strerror(rc)));
  std::set<std::string> out;
  for (const addrinfo* a = found; a; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw = a->ai_family == AF_INET ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr)
                                              : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr);
    if (inet_ntop(a->ai_family, raw, text, sizeof(text))) out.insert(text);
  }
  freeaddrinfo(found);
  return out;
}

bool is_loopback(const std::string& address) {
  return address == "::1" || address.starts_with("127.") || address.starts_with("::ffff:127.");
}

// This host's ephemeral port range, nullopt where it cannot be read.
std::optional<std::pair<int, int>> local_port_range() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int lo = 0, hi = 0;
  if (!(in >> lo >> hi)) return std::nullopt;
  return std::make_pair(lo, hi);
}

}  // namespace

void check_master_address(const LaunchEnv& env) {
  const auto addresses = resolve_master(env);
  if (env.nodes > 1 && !addresses.empty() &&
      std::all_of(addresses.begin(), addresses.end(), [](const std::string& a) { return is_loopback(a); }))
    throw ConfigError(fmt::format(
        "rank {} of {}: the master address \"{}\" ({}) resolves to {} on {}, a loopback address, but the job spans "
        "{} nodes: each node would look for rank 0 on itself; set MASTER_ADDR to a name or address of the first "
        "node that the others reach",
        env.rank, env.world_size, env.master_addr, env.master_from, *addresses.begin(), host_name_here(), env.nodes));
  if (env.rank == 0 && env.port_from == "SLURM_JOB_ID")
    if (const auto range = local_port_range(); range && env.master_port >= range->first &&
                                                   env.master_port <= range->second)
      spdlog::warn(
          "port {} (15000 + SLURM_JOB_ID % 15000) lies in this host's ephemeral range {}-{}, where an outgoing "
          "connection may hold it: set MASTER_PORT, or MpiParams=ports=A-B in slurm.conf for ports Slurm reserves "
          "per step",
          env.master_port, range->first, range->second);
}

}  // namespace xsagpt
