#!/usr/bin/env bash
# A real Kubernetes control plane for the Kubernetes collector's tests (infra/kubernetes/start.sh):
# kube-apiserver built from the k8s.io/kubernetes Go module and the etcd server of the release it
# was tested with, both pinned by tools/kube-apiserver/go.mod (k8s.io/kubernetes refers to its
# staging modules by local paths, so go.mod pins each k8s.io/* module to the matching v0.x release).
#
# Built with the machine's Go from the Go module proxy and cached outside the clone, in
# ${XDG_CACHE_HOME:-$HOME/.cache}/gpuledger/bin; idempotent (a stamp holds the hash of go.mod,
# go.sum and the Go version). The first build takes about five minutes on two cores. A machine
# without Go skips this step with one line; the Kubernetes API tests then fail and say how to build.
set -euo pipefail
cd "$(dirname "$0")/../.."

bin="${XDG_CACHE_HOME:-$HOME/.cache}/gpuledger/bin"
stamp="$bin/.kube-stamp"
if ! command -v go >/dev/null 2>&1; then
  echo "setup: kube-apiserver and etcd skipped: no Go on PATH (the Kubernetes API tests need them)" >&2
  exit 0
fi
want="$( (go version; cat tools/kube-apiserver/go.mod tools/kube-apiserver/go.sum) | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$bin/kube-apiserver" ] && [ -x "$bin/etcd" ]; then
  exit 0
fi
mkdir -p "$bin"
echo "setup: building kube-apiserver and etcd into $bin (first time: about five minutes)"
(
  cd tools/kube-apiserver
  export GOFLAGS=-mod=readonly CGO_ENABLED=0
  release="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"  # v1.37.2: what /version answers
  minor="$(echo "$release" | cut -d. -f2)"
  v=k8s.io/component-base/version
  go build -trimpath -ldflags "-s -w -X $v.gitVersion=$release -X $v.gitMajor=1 -X $v.gitMinor=$minor" \
    -o "$bin/kube-apiserver.new" k8s.io/kubernetes/cmd/kube-apiserver
  go build -trimpath -ldflags "-s -w" -o "$bin/etcd.new" go.etcd.io/etcd/server/v3
)
mv "$bin/kube-apiserver.new" "$bin/kube-apiserver"
mv "$bin/etcd.new" "$bin/etcd"
echo "$want" >"$stamp"
