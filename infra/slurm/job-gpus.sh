# Sourced by prolog.sh and epilog.sh: job_gpus prints the GPU indices the job holds on this node,
# space-separated. SLURM_JOB_GPUS where Slurm sets it in the prolog's environment; otherwise (Slurm
# 22.05 does not) from `scontrol show job -d`, whose per-node lines read
# `Nodes=<hostlist> CPU_IDs=… GRES=gpu:h100:3(IDX:2-4)`.
job_gpus() {
  if [ -n "${SLURM_JOB_GPUS:-}" ]; then echo "${SLURM_JOB_GPUS//,/ }"; return; fi
  local line nodes idx part
  scontrol show job -d "$SLURM_JOB_ID" 2>/dev/null | grep -E '^\s*Nodes=.*IDX:' | while read -r line; do
    nodes="${line#Nodes=}"; nodes="${nodes%% *}"
    scontrol show hostnames "$nodes" 2>/dev/null | grep -qx "$SLURMD_NODENAME" || continue
    idx="${line##*IDX:}"; idx="${idx%%)*}"
    for part in ${idx//,/ }; do
      if [[ "$part" == *-* ]]; then seq "${part%-*}" "${part#*-}"; else echo "$part"; fi
    done
  done | tr '\n' ' '
}
