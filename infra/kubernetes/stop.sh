#!/usr/bin/env bash
# Stop the test control plane started by infra/kubernetes/start.sh (by pid; its state stays).
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
D="${KUBE_DIR:-$ROOT/.gpuledger/kubernetes}"
. "$ROOT/infra/pidfiles.sh"
stop_pidfiles "$D/run/kube-apiserver.pid" "$D/run/kube-apiserver-direct.pid"
stop_pidfiles "$D/run/etcd.pid"
