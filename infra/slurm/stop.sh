#!/usr/bin/env bash
# Stop the test Slurm cluster started by infra/slurm/start.sh (by pid; its state stays): the Slurm
# daemons together, then slurmdbd, then its database and munged.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
D="${SLURM_DIR:-$ROOT/.gpuledger/slurm}"
. "$ROOT/infra/pidfiles.sh"
stop_pidfiles "$D/run/slurmrestd.pid" "$D"/run/slurmd-*.pid "$D/run/slurmctld.pid"
stop_pidfiles "$D/run/slurmdbd.pid"
stop_pidfiles "$D/run/mariadb.pid" "$D/run/munged.pid"
