// Where this process sits in a multi-process job, read from its launcher's
// environment, before any communication.
//
// torchrun (and anything following its env:// convention) sets RANK, LOCAL_RANK,
// WORLD_SIZE, MASTER_ADDR and MASTER_PORT, plus TORCHELASTIC_USE_AGENT_STORE=True
// when its agent already serves the TCPStore at MASTER_ADDR:MASTER_PORT. These
// always win; a torchrun job is distributed even with WORLD_SIZE=1.
//
// SLURM is the fallback: inside an srun step, RANK = SLURM_PROCID, LOCAL_RANK =
// SLURM_LOCALID and WORLD_SIZE = SLURM_STEP_NUM_TASKS (else SLURM_NTASKS);
// MASTER_ADDR defaults to the first host of SLURM_STEP_NODELIST (else
// SLURM_JOB_NODELIST, SLURM_NODELIST) and MASTER_PORT to 15000 + SLURM_JOB_ID %
// 15000, so concurrent jobs sharing a node get different ports. The batch script
// itself also carries SLURM_PROCID=0 and SLURM_NTASKS but is one process, so
// only srun tasks (SLURM_STEP_ID or SLURM_STEP_NUM_TASKS set) count; a
// one-task step runs single-process.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace xsagpt {

struct LaunchEnv {
  std::string launcher;  // "torchrun" (RANK/WORLD_SIZE convention) or "SLURM"
  int64_t rank = 0, local_rank = 0, world_size = 1;
  std::string master_addr;
  int master_port = 0;
  bool agent_store = false;  // connect to torchrun's agent store as a client
};

// Environment lookup (a parameter so that tests need not touch the process's).
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
std::optional<std::string> process_env(const std::string& name);

// The launch, or nullopt for a plain single-process run. Throws ConfigError
// naming the variable when one is missing, malformed or out of range.
std::optional<LaunchEnv> read_launch_env(const EnvLookup& env = process_env);

// First host of a SLURM hostlist expression: "gpu[003-010,12],login1" -> "gpu003".
std::string first_slurm_host(const std::string& nodelist);

}  // namespace xsagpt
