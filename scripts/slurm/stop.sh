#!/usr/bin/env bash
# Stops the cluster that scripts/slurm/start.sh started from a state folder, and nothing
# else: its jobs are cancelled (so that their processes end with them), then every process
# whose environment carries the folder's marker (munged, slurmctld, slurmd and the
# slurmstepd of any job step) gets SIGTERM, then SIGKILL after a few seconds. A pid is
# never trusted alone: a pid file's pid may have been reused by an unrelated process.
# Safe to call twice, or for a folder where nothing runs. Leaves the folder (logs) in place.
#   bash scripts/slurm/stop.sh [STATE_DIR]   (default: XSAGPT_SLURM_DIR, else .slurm)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
state="${1:-${XSAGPT_SLURM_DIR:-$root/.slurm}}"
[ -d "$state" ] || exit 0
state="$(cd "$state" && pwd)"
marker="XSAGPT_SLURM_STATE=$state"

ours() {  # the pids of the processes that carry this folder's marker
  local env_file pid
  for env_file in /proc/[0-9]*/environ; do
    pid="${env_file#/proc/}"; pid="${pid%/environ}"
    [ "$pid" = "$$" ] && continue
    # Unreadable (another user's, or gone): not ours; a zombie's environment reads empty.
    { tr '\0' '\n' < "$env_file"; } 2>/dev/null | grep -qxF "$marker" && echo "$pid"
  done
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

pids="$(ours)"
[ -z "$pids" ] && { rm -f "$state"/run/*.pid; exit 0; }
kill -TERM $pids 2>/dev/null
for _ in $(seq 50); do
  pids="$(ours)"
  [ -z "$pids" ] && break
  sleep 0.1
done
if [ -n "$pids" ]; then
  echo "[slurm] still running after 5 s, killed: $pids" >&2
  kill -KILL $pids 2>/dev/null
  sleep 0.2
fi
rm -f "$state"/run/*.pid
echo "[slurm] stopped the cluster of $state" >&2
