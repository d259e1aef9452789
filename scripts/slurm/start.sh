#!/usr/bin/env bash
# Starts a local Slurm cluster on this machine (Debian's slurmctld, slurmd and munged) as
# plain daemons, for testing the sweep's Slurm jobs against the real scheduler rather
# than a mock. No systemd and no cgroups: every file the cluster has (slurm.conf, the munge
# key, sockets, logs, spool, state, pid files) lies under one state folder, so that several
# clusters can run side by side and scripts/slurm/stop.sh stops exactly what this started.
#   bash scripts/slurm/start.sh [--nodes N] [STATE_DIR]
#   --nodes 1 (default)           one node called localhost, on this machine's network, the
#                                 daemons on free ports
#   --nodes N (2 to 9)            a cluster as a lab has one: the controller (host name ctl)
#                                 and N nodes (n-01, n-02, ...), each daemon in a network and
#                                 UTS namespace of its own (ip netns, unshare --uts), with its
#                                 own host name and its own address on a bridge this script
#                                 creates, 10.X.Y.0/24 with X and Y from the state folder's
#                                 path (another if taken). Each namespace's /etc/hosts
#                                 (/etc/netns/NAME/hosts, mounted over /etc/hosts as `ip netns
#                                 exec` mounts it) names them all, so that host names resolve
#                                 in the jobs as on a cluster; it has no name server and no
#                                 route beyond the bridge, so nothing leaves these addresses.
#                                 slurm.conf's MpiParams=ports gives each job step ports of
#                                 its own (SLURM_STEP_RESV_PORTS). Needs root; exits 3 where
#                                 network namespaces cannot be made, saying why.
#   STATE_DIR / XSAGPT_SLURM_DIR  the state folder (default .slurm in the checkout); a
#                                 cluster already running from it is stopped first, and
#                                 its jobs are forgotten (the controller starts clean)
#   XSAGPT_SLURM_CPUS             CPUs each node advertises (default 8, whatever the machine
#                                 has: a few tasks run at once, and none waits for a core)
# Prints `export SLURM_CONF=...` on stdout (also written to STATE_DIR/env.sh): every
# client command (sbatch, srun, squeue, scontrol) needs it. Returns once sinfo shows every
# node idle; exits non-zero with the logs' last lines if they do not come up. What it made
# for the namespaces is listed in STATE_DIR/net.env, line by line as it makes it, so that
# stop.sh removes exactly that, also after a start that failed half-way.
# Runs as root, as the test command does (SlurmUser and SlurmdUser are the caller).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
nodes=1
state=""
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes="${2:-}"; shift 2 || { echo "[slurm] --nodes: expected a number" >&2; exit 2; } ;;
    --nodes=*) nodes="${1#--nodes=}"; shift ;;
    -*) echo "[slurm] unknown option $1 (expected --nodes N and a state folder)" >&2; exit 2 ;;
    *) [ -z "$state" ] || { echo "[slurm] one state folder, not '$state' and '$1'" >&2; exit 2; }; state="$1"; shift ;;
  esac
done
state="${state:-${XSAGPT_SLURM_DIR:-$root/.slurm}}"
cpus="${XSAGPT_SLURM_CPUS:-8}"
say() { printf '[slurm] %s\n' "$*" >&2; }
for prog in slurmctld slurmd munged sinfo; do
  command -v "$prog" >/dev/null || {
    say "no $prog on the PATH: install Slurm with 'bash scripts/setup.sh --slurm'"; exit 2; }
done
[[ "$cpus" =~ ^[1-9][0-9]*$ ]] || { say "XSAGPT_SLURM_CPUS='$cpus': expected a positive integer"; exit 2; }
[[ "$nodes" =~ ^[1-9]$ ]] || { say "--nodes '$nodes': expected a number from 1 to 9"; exit 2; }

mkdir -p "$state"
state="$(cd "$state" && pwd)"
# Unix sockets (munge's, slurmd's per step) have a 108-byte path limit.
[ ${#state} -le 60 ] || { say "state folder $state: path longer than 60 characters (socket paths would not fit)"; exit 2; }
bash "$root/scripts/slurm/stop.sh" "$state" >/dev/null 2>&1 || true
rm -rf "$state/munge" "$state/ctld" "$state/spool" "$state/log" "$state/run" "$state/net.env"
mkdir -p "$state/munge" "$state/ctld" "$state/spool" "$state/log" "$state/run"
# munged refuses a socket folder that others may write, and clients must reach it.
chmod 0755 "$state" "$state/munge"
chmod 0700 "$state/ctld" "$state/spool"

# The marker in every daemon's environment: stop.sh kills a pid only when it carries this
# folder's marker, so a reused pid, or another cluster's daemon, is never touched.
marker="XSAGPT_SLURM_STATE=$state"
user="$(id -un)"
fail() {
  say "$1"
  for f in "$state"/log/*.log; do [ -f "$f" ] && { say "--- $f"; tail -n 15 "$f" >&2 || true; }; done
  bash "$root/scripts/slurm/stop.sh" "$state" >&2 || true
  exit "${2:-1}"
}

if [ "$nodes" -eq 1 ]; then
  # The node is called localhost, which resolves on every machine: a job step's node list
  # names it, and a program that finds its master address there (the trainer's Gloo ranks
  # under srun) must be able to reach it, where this machine's own name may not resolve.
  ctl_name=localhost ctl_addr=127.0.0.1
  node_names=(localhost) node_addrs=(127.0.0.1)
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
  ports_line=""
else
  [ "$(id -u)" -eq 0 ] || { say "--nodes $nodes: network namespaces need root"; exit 3; }
  for prog in ip unshare nsenter; do
    command -v "$prog" >/dev/null || { say "--nodes $nodes: no $prog on the PATH (iproute2, util-linux)"; exit 3; }
  done
  # Names of at most 15 characters (a link's limit), the same for the same folder.
  id="$(printf '%s' "$state" | md5sum | cut -c1-6)"
  net="$state/net.env"
  made() { printf '%s\n' "$*" >> "$net"; }  # stop.sh undoes these lines, last first
  # A /24 no interface or route of this machine uses yet.
  taken="$(ip -o -4 addr show 2>/dev/null; ip -4 route show table all 2>/dev/null)"
  a=$(( 64 + 16#${id:0:2} % 64 )) b=$(( 16#${id:2:2} ))
  for _ in $(seq 256); do
    grep -qF " 10.$a.$b." <<<"$taken" || grep -qE "(^| )10\.$a\.$b\.0/" <<<"$taken" || break
    b=$(( (b + 1) % 256 ))
  done
  subnet="10.$a.$b"
  bridge="xsb$id"
  [ -d /etc/netns ] || { mkdir /etc/netns; made "etcdir /etc/netns"; }
  err="$(ip link add "$bridge" type bridge 2>&1)" ||
    fail "--nodes $nodes: cannot make a bridge here (ip link add: $err)" 3
  made "link $bridge"
  ip addr add "$subnet.1/24" dev "$bridge"
  ip link set "$bridge" up
  ctl_name=ctl ctl_addr="$subnet.2"
  node_names=() node_addrs=()
  for k in $(seq "$nodes"); do node_names+=("$(printf 'n-%02d' "$k")"); node_addrs+=("$subnet.$((10 + k))"); done
  # /etc/hosts of every namespace: the cluster's names, and this machine's (where sbatch and
  # srun run) as its address on the bridge.
  hosts="127.0.0.1 localhost
::1 localhost
$subnet.1 $(hostname)
$ctl_addr $ctl_name"
  for k in "${!node_names[@]}"; do hosts+=$'\n'"${node_addrs[$k]} ${node_names[$k]}"; done
  # One namespace per daemon, its end of a veth pair on the bridge as eth0.
  ns_of() { echo "xsagpt-$id-$1"; }
  for who in ctl "${node_names[@]}"; do
    ns="$(ns_of "$who")"
    if [ "$who" = ctl ]; then addr="$ctl_addr" veth="xsv${id}c"; else
      k="${who#n-}"; k=$((10#$k)); addr="${node_addrs[$((k - 1))]}" veth="xsv${id}$k"; fi
    err="$(ip netns add "$ns" 2>&1)" ||
      fail "--nodes $nodes: network namespaces are not available here (ip netns add: $err)" 3
    made "netns $ns"
    mkdir -p "/etc/netns/$ns"
    made "etc /etc/netns/$ns"
    printf '%s\n' "$hosts" > "/etc/netns/$ns/hosts"
    printf '# No name server: names resolve from this node'"'"'s hosts file, and a lookup sends nothing.\n' \
      > "/etc/netns/$ns/resolv.conf"
    ip link add "$veth" type veth peer name "${veth}p"
    made "link $veth"
    ip link set "${veth}p" netns "$ns"
    ip link set "$veth" master "$bridge" up
    ip -n "$ns" link set "${veth}p" name eth0
    ip -n "$ns" addr add "$addr/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
  done
  # Each daemon in its own namespaces, the defaults' fixed ports then free on its address.
  ctld_port=6817 slurmd_port=6818
  ports_line="MpiParams=ports=20000-20999"
  # Written last: the namespaces above are all stop.sh needs; this line says the cluster is
  # a multi-node one for the scripts and tests that read it.
  made "nodes $nodes"
fi

dd if=/dev/urandom of="$state/munge/munge.key" bs=1024 count=1 status=none
chmod 0400 "$state/munge/munge.key"
socket="$state/munge/munge.socket"
conf="$state/slurm.conf"
{
  cat <<EOF
# Written by scripts/slurm/start.sh: a test cluster of $nodes node(s), all of it under $state.
ClusterName=xsagpt
SlurmctldHost=$ctl_name($ctl_addr)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
# A credential that expires in 10 s rather than 160 brings a requeued job back in seconds.
AuthInfo=socket=$socket,cred_expire=10
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool/%n
SlurmctldPidFile=$state/run/slurmctld.pid
SlurmdPidFile=$state/run/slurmd-%n.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd-%n.log
# Plain processes: no cgroups, no accounting database.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
$ports_line
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# The nodes advertise more CPUs than the machine may have.
SlurmdParameters=config_overrides
ReturnToService=2
JobRequeue=1
# The scheduler's passes every second (60 s and 30 s by default): a requeued job may start
# once its credential has expired (cred_expire + 1 s), and should not wait a minute more.
SchedulerParameters=sched_interval=1,bf_interval=1
KillWait=5
InactiveLimit=0
MinJobAge=300
EOF
  for k in "${!node_names[@]}"; do
    echo "NodeName=${node_names[$k]} NodeAddr=${node_addrs[$k]} CPUs=$cpus RealMemory=1000 State=UNKNOWN"
  done
  echo "PartitionName=debug Nodes=$(IFS=,; echo "${node_names[*]}") Default=YES MaxTime=INFINITE OverSubscribe=YES State=UP"
} > "$conf"
printf 'export SLURM_CONF=%q\n' "$conf" > "$state/env.sh"

env "$marker" munged --socket="$socket" --key-file="$state/munge/munge.key" \
  --pid-file="$state/run/munged.pid" --log-file="$state/log/munged.log" \
  --seed-file="$state/munge/munged.seed" --force
export SLURM_CONF="$conf"
# in_host NAME CMD...: CMD in NAME's namespaces with NAME as its host name (one node: here).
# What `ip netns exec` does, /etc/netns/NS/* bound over /etc/* in a mount namespace of the
# daemon's own, without its fresh /sys, which would hide the cgroup hierarchies that
# slurmd insists on finding even with proctrack/linuxproc.
in_host() {
  local who="$1"; shift
  if [ "$nodes" -eq 1 ]; then env "$marker" "$@"; return; fi
  local ns; ns="$(ns_of "$who")"
  nsenter --net="/run/netns/$ns" -- unshare --mount --uts -- sh -c \
    'mount --bind "$1/hosts" /etc/hosts && mount --bind "$1/resolv.conf" /etc/resolv.conf && hostname "$0" &&
     shift && exec "$@"' "$who" "/etc/netns/$ns" env "$marker" "$@"
}
# -c: a clean controller, no jobs recovered from an earlier start.
in_host "$ctl_name" slurmctld -c -f "$conf"
for name in "${node_names[@]}"; do
  mkdir -p "$state/spool/$name"
  chmod 0700 "$state/spool/$name"
  in_host "$name" slurmd -f "$conf" -N "$name"
done

for _ in $(seq 300); do
  node_states="$(timeout 5 sinfo -h -N -o %T 2>/dev/null | sort -u | tr '\n' ' ' || true)"
  [ "$node_states" = "idle " ] && [ "$(timeout 5 sinfo -h -N -o %N 2>/dev/null | wc -l)" -eq "$nodes" ] && break
  sleep 0.1
done
[ "$node_states" = "idle " ] || fail "the nodes are not idle after 30 s (sinfo: '${node_states:-no answer}')"
if [ "$nodes" -eq 1 ]; then
  say "cluster up: node localhost idle with $cpus CPUs, controller on port $ctld_port, state in $state"
else
  say "cluster up: nodes ${node_names[*]} idle with $cpus CPUs each on $subnet.0/24 (bridge $bridge), controller $ctl_name at $ctl_addr, state in $state"
fi
cat "$state/env.sh"
