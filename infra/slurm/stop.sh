#!/usr/bin/env bash
# Stop the test Slurm cluster started by infra/slurm/start.sh (by pid; its state stays): the Slurm
# daemons together, then slurmdbd, then its database and munged.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
D="${SLURM_DIR:-$ROOT/.gpuledger/slurm}"
stop() {  # stop <pid files…>: signal them all, then wait for each
  local pids=() f p
  for f in "$@"; do [ -f "$f" ] && pids+=("$(cat "$f")"); done
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done; done
  rm -f "$@"
}
stop "$D/run/slurmrestd.pid" "$D"/run/slurmd-*.pid "$D/run/slurmctld.pid"
stop "$D/run/slurmdbd.pid"
stop "$D/run/mariadb.pid" "$D/run/munged.pid"
