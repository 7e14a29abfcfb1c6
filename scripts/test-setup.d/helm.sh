#!/usr/bin/env bash
# The chart's tools: helm (built from its Go module) and tools/manifestcheck (the project's strict
# validator: every rendered object decoded into the Kubernetes API types, unknown fields refused;
# compose.yaml loaded by the Compose specification's own Go loader). tests/integration/test_helm_chart.py
# and test_compose.py run them.
#
# Both are built with the machine's Go from the Go module proxy and cached outside the clone, in
# ${XDG_CACHE_HOME:-$HOME/.cache}/gpuledger/bin; idempotent (a stamp holds the hash of the helm
# version and of the validator's sources). A machine without Go skips this step with one line; the
# chart tests then fail and say how to build the tools.
set -euo pipefail
cd "$(dirname "$0")/../.."

HELM_MODULE=helm.sh/helm/v4
HELM_VERSION=v4.3.2

bin="${XDG_CACHE_HOME:-$HOME/.cache}/gpuledger/bin"
stamp="$bin/.stamp"
if ! command -v go >/dev/null 2>&1; then
  echo "setup: helm and manifestcheck skipped: no Go on PATH (the chart tests need them)" >&2
  exit 0
fi
sources() {  # the validator's sources, in a stable order (none yet on a checkout without it)
  [ -d tools/manifestcheck ] || return 0
  find tools/manifestcheck -type f \( -name '*.go' -o -name 'go.mod' -o -name 'go.sum' \) | sort | xargs -r cat
}
want="$( (echo "$HELM_MODULE@$HELM_VERSION"; go version; sources) | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$bin/helm" ]; then
  if [ ! -d tools/manifestcheck ] || [ -x "$bin/manifestcheck" ]; then
    exit 0
  fi
fi
mkdir -p "$bin"
echo "setup: building helm $HELM_VERSION and the manifest validator into $bin (first time: a few minutes)"
if [ ! -x "$bin/helm" ] || [ "$("$bin/helm" version --template '{{.Version}}' 2>/dev/null)" != "$HELM_VERSION" ]; then
  GOBIN="$bin" GOFLAGS=-mod=mod CGO_ENABLED=0 go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
    "$HELM_MODULE/cmd/helm@$HELM_VERSION"
fi
if [ -d tools/manifestcheck ]; then
  (cd tools/manifestcheck && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin/manifestcheck" .)
fi
echo "$want" >"$stamp"
