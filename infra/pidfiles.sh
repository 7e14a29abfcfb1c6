# Sourced by the stop scripts of the test clusters (infra/slurm, infra/kubernetes).
# stop_pidfiles <pid files…>: signal every process named by one of them, then wait for each to end
# (up to 10 s each) and remove the files; missing files are skipped.
stop_pidfiles() {
  local pids=() f p
  for f in "$@"; do [ -f "$f" ] && pids+=("$(cat "$f")"); done
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done; done
  rm -f "$@"
}
