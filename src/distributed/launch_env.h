// Where this process sits in a multi-process job, read from its launcher's
// environment, before any communication.
//
// torchrun (and anything following its env:// convention) sets RANK, LOCAL_RANK,
// WORLD_SIZE, MASTER_ADDR and MASTER_PORT, plus TORCHELASTIC_USE_AGENT_STORE=True
// when its agent already serves the TCPStore at MASTER_ADDR:MASTER_PORT. These
// always win; a torchrun job is distributed even with WORLD_SIZE=1.
//
// SLURM is the fallback: inside an srun step, RANK = SLURM_PROCID, LOCAL_RANK =
// SLURM_LOCALID and WORLD_SIZE = SLURM_STEP_NUM_TASKS (else SLURM_NTASKS). The batch
// script itself also carries SLURM_PROCID=0 and SLURM_NTASKS but is one process, so
// only srun tasks (SLURM_STEP_ID or SLURM_STEP_NUM_TASKS set) count; a one-task step
// runs single-process.
//   - MASTER_ADDR, unless set, is the first host of SLURM_STEP_NODELIST (else
//     SLURM_JOB_NODELIST, SLURM_NODELIST), expanded as Slurm's hostlists are
//     (slurm_hostnames): the node of task 0, which serves the store.
//   - MASTER_PORT, unless set, is the first of the ports Slurm reserved for the step
//     (SLURM_STEP_RESV_PORTS, given where slurm.conf has MpiParams=ports=A-B): no other
//     step on the node holds it, so jobs sharing a node never collide. Without it,
//     15000 + SLURM_JOB_ID % 15000: below Linux's ephemeral range (32768-60999 by
//     default), where a port taken for an outgoing connection would make the bind fail
//     now and then; jobs sharing a node collide only when their ids differ by a
//     multiple of 15000, and two steps of one job running at once always do.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace xsagpt {

struct LaunchEnv {
  std::string launcher;  // "torchrun" (RANK/WORLD_SIZE convention) or "SLURM"
  int64_t rank = 0, local_rank = 0, world_size = 1;
  int64_t nodes = 0;        // the nodes the job spans, where the launcher says (0: unknown)
  std::string master_addr;
  std::string master_from;  // where master_addr came from, for messages: "MASTER_ADDR", "the first host of ..."
  int master_port = 0;
  std::string port_from;  // MASTER_PORT, SLURM_STEP_RESV_PORTS or SLURM_JOB_ID
  bool agent_store = false;  // connect to torchrun's agent store as a client
};

// Environment lookup (a parameter so that tests need not touch the process's).
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
std::optional<std::string> process_env(const std::string& name);

// The launch, or nullopt for a plain single-process run. Throws ConfigError
// naming the variable when one is missing, malformed or out of range.
std::optional<LaunchEnv> read_launch_env(const EnvLookup& env = process_env);

// The hosts of a Slurm hostlist, in order, as `scontrol show hostnames` prints them:
// names separated by commas or blanks, each with bracketed groups of numbers and ranges
// ("gpu[003-010,12],login1"); a range's numbers are as wide as its first one, zeros kept
// ("n[08-10]": n08 n09 n10); several groups expand as nested loops, the first outermost
// ("r[1-2]n[1-2]": r1n1 r1n2 r2n1 r2n2). Text after the last group (n[1-2]-ib) is kept,
// as pdsh and newer hostlist libraries read it. At most `at_most` hosts are expanded.
// Throws ConfigError naming the list and what is wrong: an unbalanced bracket, an empty
// group or range, a range that is not two numbers in order, no host.
std::vector<std::string> slurm_hostnames(const std::string& nodelist, size_t at_most = 1'000'000);

// First host of a SLURM hostlist expression: "gpu[003-010,12],login1" -> "gpu003".
std::string first_slurm_host(const std::string& nodelist);

}  // namespace xsagpt
