// The master address and port checked on every rank before it talks to any other.
// Rank 0 serves the store on all of its addresses, so it never notices a master address
// that the others cannot reach: without these checks a name that does not resolve, or a
// host name that resolves to a loopback address on a job of several nodes (each node
// reaching only itself), ends in a hang until the collective timeout rather than an
// error. So each rank resolves the address itself and refuses, naming it and where it
// came from:
//   - a name that does not resolve on this host;
//   - on a job that spans several nodes (LaunchEnv::nodes), an address that resolves to
//     loopback addresses only.
// And a port that was derived from the job id (not given, not reserved by Slurm) inside
// this host's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range) gets a warning
// on rank 0: an outgoing connection may hold it, and the bind then fails now and then.
#pragma once

#include "distributed/launch_env.h"

namespace xsagpt {

// Throws ConfigError naming the address when this rank could not meet the others there.
void check_master_address(const LaunchEnv& env);

}  // namespace xsagpt
