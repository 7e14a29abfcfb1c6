#!/usr/bin/env bash
# Stop the test Slurm cluster started by infra/slurm/start.sh (by pid; its state stays).
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
D="${SLURM_DIR:-$ROOT/.gpuledger/slurm}"
for pid in "$D"/run/slurmd-*.pid "$D/run/slurmctld.pid" "$D/run/slurmdbd.pid" "$D/run/mariadb.pid" "$D/run/munged.pid"; do
  [ -f "$pid" ] || continue
  p="$(cat "$pid")"
  kill "$p" 2>/dev/null && for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
  rm -f "$pid"
done
