#!/usr/bin/env bash
# Stop the test control plane started by infra/kubernetes/start.sh (by pid; its state stays).
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
D="${KUBE_DIR:-$ROOT/.gpuledger/kubernetes}"
stop() {  # stop <pid files…>: signal them all, then wait for each
  local pids=() f p
  for f in "$@"; do [ -f "$f" ] && pids+=("$(cat "$f")"); done
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done; done
  rm -f "$@"
}
stop "$D/run/kube-apiserver.pid" "$D/run/kube-apiserver-direct.pid"
stop "$D/run/etcd.pid"
