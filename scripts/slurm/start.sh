#!/usr/bin/env bash
# Starts a one-node Slurm cluster on this machine (Debian's slurmctld, slurmd and munged)
# as plain daemons, for testing the sweep's Slurm jobs against the real scheduler rather
# than a mock. No systemd and no cgroups: every file the cluster has (slurm.conf, the munge
# key, sockets, logs, spool, state, pid files) lies under one state folder, so that several
# clusters can run side by side (each on free ports) and scripts/slurm/stop.sh stops
# exactly what this started.
#   bash scripts/slurm/start.sh [STATE_DIR]
#   STATE_DIR / XSAGPT_SLURM_DIR  the state folder (default .slurm in the checkout); a
#                                 cluster already running from it is stopped first, and
#                                 its jobs are forgotten (the controller starts clean)
#   XSAGPT_SLURM_CPUS             CPUs the node advertises (default 8, whatever the machine
#                                 has: a few tasks run at once, and none waits for a core)
# Prints `export SLURM_CONF=...` on stdout (also written to STATE_DIR/env.sh): every
# client command (sbatch, srun, squeue, scontrol) needs it. Returns once sinfo shows the
# node idle; exits non-zero with the logs' last lines if it does not come up.
# Runs as root, as the test command does (SlurmUser and SlurmdUser are the caller).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
state="${1:-${XSAGPT_SLURM_DIR:-$root/.slurm}}"
cpus="${XSAGPT_SLURM_CPUS:-8}"
say() { printf '[slurm] %s\n' "$*" >&2; }
for prog in slurmctld slurmd munged sinfo; do
  command -v "$prog" >/dev/null || {
    say "no $prog on the PATH: install Slurm with 'bash scripts/setup.sh --slurm'"; exit 2; }
done
[[ "$cpus" =~ ^[1-9][0-9]*$ ]] || { say "XSAGPT_SLURM_CPUS='$cpus': expected a positive integer"; exit 2; }

mkdir -p "$state"
state="$(cd "$state" && pwd)"
# Unix sockets (munge's, slurmd's per step) have a 108-byte path limit.
[ ${#state} -le 60 ] || { say "state folder $state: path longer than 60 characters (socket paths would not fit)"; exit 2; }
bash "$root/scripts/slurm/stop.sh" "$state" >/dev/null 2>&1 || true
rm -rf "$state/munge" "$state/ctld" "$state/spool" "$state/log" "$state/run"
mkdir -p "$state/munge" "$state/ctld" "$state/spool" "$state/log" "$state/run"
# munged refuses a socket folder that others may write, and clients must reach it.
chmod 0755 "$state" "$state/munge"
chmod 0700 "$state/ctld" "$state/spool"

# The marker in every daemon's environment: stop.sh kills a pid only when it carries this
# folder's marker, so a reused pid, or another cluster's daemon, is never touched.
marker="XSAGPT_SLURM_STATE=$state"
user="$(id -un)"
# The node is called localhost, which resolves on every machine: a job step's node list
# names it, and a program that finds its master address there (the trainer's Gloo ranks
# under srun) must be able to reach it, where this machine's own name may not resolve.
host=localhost
# Two free TCP ports, for the controller and the node daemon, so that clusters side by
# side do not collide.
read -r ctld_port slurmd_port < <(python3 - <<'EOF'
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
EOF
)
[ -n "${slurmd_port:-}" ] || { say "python3 found no free ports for the cluster"; exit 1; }

dd if=/dev/urandom of="$state/munge/munge.key" bs=1024 count=1 status=none
chmod 0400 "$state/munge/munge.key"
socket="$state/munge/munge.socket"
conf="$state/slurm.conf"
cat > "$conf" <<EOF
# Written by scripts/slurm/start.sh: a one-node test cluster, all of it under $state.
ClusterName=xsagpt
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
# A credential that expires in 10 s rather than 160 brings a requeued job back in seconds.
AuthInfo=socket=$socket,cred_expire=10
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool
SlurmctldPidFile=$state/run/slurmctld.pid
SlurmdPidFile=$state/run/slurmd.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd.log
# Plain processes: no cgroups, no accounting database.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# The node advertises more CPUs than the machine may have.
SlurmdParameters=config_overrides
ReturnToService=2
JobRequeue=1
# The scheduler's passes every second (60 s and 30 s by default): a requeued job may start
# once its credential has expired (cred_expire + 1 s), and should not wait a minute more.
SchedulerParameters=sched_interval=1,bf_interval=1
KillWait=5
InactiveLimit=0
MinJobAge=300
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE OverSubscribe=YES State=UP
EOF
printf 'export SLURM_CONF=%q\n' "$conf" > "$state/env.sh"

env "$marker" munged --socket="$socket" --key-file="$state/munge/munge.key" \
  --pid-file="$state/run/munged.pid" --log-file="$state/log/munged.log" \
  --seed-file="$state/munge/munged.seed" --force
export SLURM_CONF="$conf"
# -c: a clean controller, no jobs recovered from an earlier start.
env "$marker" slurmctld -c -f "$conf"
env "$marker" slurmd -f "$conf" -N "$host"

fail() {
  say "$1"
  for f in "$state"/log/*.log; do say "--- $f"; tail -n 15 "$f" >&2 || true; done
  bash "$root/scripts/slurm/stop.sh" "$state" >&2 || true
  exit 1
}
for _ in $(seq 300); do
  node_state="$(timeout 5 sinfo -h -N -o %T 2>/dev/null || true)"
  [ "$node_state" = idle ] && break
  sleep 0.1
done
[ "$node_state" = idle ] || fail "the node is not idle after 30 s (sinfo: '${node_state:-no answer}')"
say "cluster up: node $host idle with $cpus CPUs, controller on port $ctld_port, state in $state"
cat "$state/env.sh"
