#!/usr/bin/env bash
# Slurm Epilog: removes the job from dcgm-exporter's HPC job mapping written by prolog.sh (a GPU's
# file goes away with its last job). Never fails: an epilog that exits non-zero drains the node.
DIR="${DCGM_JOB_MAP_DIR:-/run/dcgm-job-map}"
[ -d "$DIR" ] || exit 0
. "$(dirname "$(readlink -f "$0")")/job-gpus.sh"
for gpu in $(job_gpus); do
  (
    flock 9
    if [ -f "$DIR/$gpu" ]; then
      grep -vx "$SLURM_JOB_ID" "$DIR/$gpu" > "$DIR/.$gpu.tmp" || true
      if [ -s "$DIR/.$gpu.tmp" ]; then mv "$DIR/.$gpu.tmp" "$DIR/$gpu"; else rm -f "$DIR/.$gpu.tmp" "$DIR/$gpu"; fi
    fi
  ) 9>"$DIR/.lock"
done
exit 0
