#!/usr/bin/env bash
# Slurm Prolog (slurm.conf `Prolog=`, with `PrologFlags=Alloc`): writes dcgm-exporter's HPC job
# mapping (`dcgm-exporter --hpc-job-mapping-dir`): one file per GPU index the job was given, holding
# the ids of the jobs on that GPU, one per line. gpuledger's DCGM collector reads the same labels
# (`hpc_job`) from the exporter. For real sites as well as for the tests; the directory is
# $DCGM_JOB_MAP_DIR, /run/dcgm-job-map by default. It never fails the job: a prolog that exits
# non-zero drains the node.
DIR="${DCGM_JOB_MAP_DIR:-/run/dcgm-job-map}"
mkdir -p "$DIR" 2>/dev/null || exit 0
. "$(dirname "$(readlink -f "$0")")/job-gpus.sh"
for gpu in $(job_gpus); do
  ( flock 9; grep -qx "$SLURM_JOB_ID" "$DIR/$gpu" 2>/dev/null || echo "$SLURM_JOB_ID" >> "$DIR/$gpu" ) 9>"$DIR/.lock"
done
exit 0
