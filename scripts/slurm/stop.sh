#!/usr/bin/env bash
# Stops the cluster that scripts/slurm/start.sh started from a state folder, and nothing
# else: its jobs are cancelled (so that their processes end with them), then every process
# whose environment carries the folder's marker (munged, slurmctld, the slurmd and the
# slurmstepd of any job step) gets SIGTERM, then SIGKILL after a few seconds. A pid is
# never trusted alone: a pid file's pid may have been reused by an unrelated process.
# A multi-node cluster's namespaces (start.sh --nodes N) are then undone from the list in
# STATE_DIR/net.env, last made first: whatever still runs in one of its network namespaces
# (only this cluster's daemons and jobs can) is killed, the namespaces and their
# /etc/netns entries removed, the veth pairs and the bridge deleted; nothing that list
# does not name is touched. Safe to call twice, or for a folder where nothing runs. Leaves
# the folder (logs) in place.
#   bash scripts/slurm/stop.sh [STATE_DIR]   (default: XSAGPT_SLURM_DIR, else .slurm)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
state="${1:-${XSAGPT_SLURM_DIR:-$root/.slurm}}"
[ -d "$state" ] || exit 0
state="$(cd "$state" && pwd)"
marker="XSAGPT_SLURM_STATE=$state"
net="$state/net.env"

ours() {  # the pids of the processes that carry this folder's marker
  # One grep over every environment, its entries NUL-separated. Unreadable (another user's,
  # or gone): not ours; a zombie's environment reads empty.
  grep -lzxF -- "$marker" /proc/[0-9]*/environ 2>/dev/null | sed -E 's#^/proc/([0-9]+)/environ$#\1#' |
    grep -vxF "$$"
}

# The namespaces start.sh made, as net.env lists them.
our_namespaces() { [ -f "$net" ] && awk '$1 == "netns" && $2 ~ /^xsagpt-/ { print $2 }' "$net"; }
in_namespaces() {  # the pids of every process in our namespaces
  local ns
  for ns in $(our_namespaces); do ip netns pids "$ns" 2>/dev/null; done
}

if [ -f "$state/slurm.conf" ] && [ -n "$(ours)" ]; then
  # Cancelling lets each job step's slurmstepd end the job's own processes, which do not
  # carry the marker (a job has its submitter's environment).
  export SLURM_CONF="$state/slurm.conf"
  if timeout 10 scancel --quiet --user="$(id -un)" 2>/dev/null; then
    for _ in $(seq 100); do
      [ -z "$(timeout 5 squeue -h -t RUNNING,COMPLETING,SUSPENDED -o %i 2>/dev/null)" ] && break
      sleep 0.1
    done
  fi
fi

stopped=""
pids="$(ours; in_namespaces)"
if [ -n "$pids" ]; then
  kill -TERM $pids 2>/dev/null
  for _ in $(seq 50); do
    pids="$(ours; in_namespaces)"
    [ -z "$pids" ] && break
    sleep 0.1
  done
  if [ -n "$pids" ]; then
    echo "[slurm] still running after 5 s, killed: $(echo $pids)" >&2
    kill -KILL $pids 2>/dev/null
    sleep 0.2
  fi
  stopped=1
fi
rm -f "$state"/run/*.pid

if [ -f "$net" ]; then
  # Undone last made first: links before the namespace list is gone, /etc/netns last.
  tac "$net" | while read -r what name; do
    # Only names start.sh gives, whatever else the file might say.
    case "$what $name" in
      "netns xsagpt-"*) ip netns del "$name" 2>/dev/null ;;
      "link xs"*) ip link show "$name" >/dev/null 2>&1 && ip link del "$name" ;;
      "etc /etc/netns/xsagpt-"*) rm -rf -- "$name" ;;
      "etcdir /etc/netns") rmdir -- "$name" 2>/dev/null ;;
    esac
  done
  rm -f "$net"
  stopped=1
fi
[ -n "$stopped" ] && echo "[slurm] stopped the cluster of $state" >&2
exit 0
