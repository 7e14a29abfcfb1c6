#!/usr/bin/env bash
# A Kubernetes control plane on loopback for the integration tests (and for trying the collector):
# etcd and two kube-apiservers on it, built by scripts/test-setup.d/kubernetes.sh, with a generated CA,
# client-certificate and service-account-token authentication and RBAC on. No kubelet, scheduler or
# controller manager runs: whoever uses it creates nodes and pods, binds them and writes their
# status through the status subresource, as a kubelet would.
#
# The two API servers, as in a highly available control plane sharing one etcd:
#   :$KUBE_PORT        the default one: a watch cache per resource, watch bookmarks;
#   :$KUBE_DIRECT_PORT --watch-cache=false: lists and watches read etcd itself, so a watch from a
#                      resourceVersion etcd has compacted away ends in 410 Gone.
# Neither compacts etcd by itself (--etcd-compaction-interval=0): a test compacts it when it wants,
# through etcd's gRPC gateway (POST /v3/kv/compaction on $ETCD_PORT).
#
# Everything lives under $KUBE_DIR (default .gpuledger/kubernetes): the CA and keys, admin.kubeconfig
# (system:masters) and direct.kubeconfig (the same user, the second server), etcd's data, the logs.
# Idempotent: a running control plane is left as is. Prints `export KUBECONFIG=…` and the versions.
# Stop with infra/kubernetes/stop.sh.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
D="${KUBE_DIR:-$ROOT/.gpuledger/kubernetes}"
mkdir -p "$D"
D="$(cd "$D" && pwd)"
BIN="${XDG_CACHE_HOME:-$HOME/.cache}/gpuledger/bin"
ETCD_PORT="${KUBE_ETCD_PORT:-12379}"
ETCD_PEER_PORT="${KUBE_ETCD_PEER_PORT:-12380}"
KUBE_PORT="${KUBE_PORT:-16443}"
KUBE_DIRECT_PORT="${KUBE_DIRECT_PORT:-16444}"

for tool in "$BIN/etcd" "$BIN/kube-apiserver"; do
  [ -x "$tool" ] || { echo "kubernetes: $tool not found (scripts/test-setup.d/kubernetes.sh builds it; it needs Go)" >&2; exit 1; }
done
command -v openssl >/dev/null || { echo "kubernetes: openssl not found" >&2; exit 1; }

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
wait_for() {  # wait_for <what> <seconds> <command…>
  local what="$1" limit="$2"; shift 2
  for _ in $(seq 1 $((limit * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "kubernetes: $what did not come up; see $D/log/" >&2; tail -5 "$D"/log/*.log >&2 || true; exit 1
}

mkdir -p "$D/pki" "$D/run" "$D/log"
chmod 700 "$D/pki"

# --- certificates --------------------------------------------------------------------------------
P="$D/pki"
if [ ! -f "$P/ca.crt" ]; then
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=gpuledger-test-ca" \
          -keyout "$P/ca.key" -out "$P/ca.crt" 2>/dev/null
fi
sign() {  # sign <name> <subject> [subjectAltName]: a key and a certificate signed by the CA
  local name="$1" subject="$2" san="${3:-}"
  [ -f "$P/$name.crt" ] && return 0
  openssl req -newkey rsa:2048 -nodes -subj "$subject" -keyout "$P/$name.key" -out "$P/$name.csr" 2>/dev/null
  if [ -n "$san" ]; then
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$san" > "$P/$name.ext"
  else
    printf 'extendedKeyUsage=clientAuth\n' > "$P/$name.ext"
  fi
  openssl x509 -req -in "$P/$name.csr" -CA "$P/ca.crt" -CAkey "$P/ca.key" -CAcreateserial -days 3650 \
          -extfile "$P/$name.ext" -out "$P/$name.crt" 2>/dev/null
  rm -f "$P/$name.csr" "$P/$name.ext"
}
sign apiserver "/CN=kube-apiserver" \
     "IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
sign admin "/O=system:masters/CN=gpuledger-admin"
[ -f "$P/sa.key" ] || openssl genrsa -out "$P/sa.key" 2048 2>/dev/null
[ -f "$P/sa.pub" ] || openssl rsa -in "$P/sa.key" -pubout -out "$P/sa.pub" 2>/dev/null

kubeconfig() {  # kubeconfig <file> <port>
  cat > "$1" <<CONF
apiVersion: v1
kind: Config
clusters:
- name: gpuledger-test
  cluster:
    server: https://127.0.0.1:$2
    certificate-authority: $P/ca.crt
users:
- name: admin
  user:
    client-certificate: $P/admin.crt
    client-key: $P/admin.key
contexts:
- name: admin
  context: {cluster: gpuledger-test, user: admin}
current-context: admin
CONF
  chmod 600 "$1"
}
kubeconfig "$D/admin.kubeconfig" "$KUBE_PORT"
kubeconfig "$D/direct.kubeconfig" "$KUBE_DIRECT_PORT"

# --- etcd ----------------------------------------------------------------------------------------
if ! alive "$D/run/etcd.pid"; then
  "$BIN/etcd" --name gpuledger-test --data-dir "$D/etcd" \
      --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
      --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
      --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
      --initial-cluster "gpuledger-test=http://127.0.0.1:$ETCD_PEER_PORT" \
      --listen-metrics-urls "" --log-level warn >"$D/log/etcd.log" 2>&1 &
  echo $! > "$D/run/etcd.pid"
  disown
fi
wait_for etcd 30 curl -sf "http://127.0.0.1:$ETCD_PORT/health"

# --- the API servers -----------------------------------------------------------------------------
apiserver() {  # apiserver <name> <port> [flags…]
  local name="$1" port="$2"; shift 2
  alive "$D/run/$name.pid" && return 0
  "$BIN/kube-apiserver" \
      --etcd-servers "http://127.0.0.1:$ETCD_PORT" --etcd-compaction-interval 0 \
      --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$port" \
      --tls-cert-file "$P/apiserver.crt" --tls-private-key-file "$P/apiserver.key" \
      --client-ca-file "$P/ca.crt" --authorization-mode RBAC \
      --service-account-issuer https://kubernetes.default.svc.cluster.local \
      --service-account-key-file "$P/sa.pub" --service-account-signing-key-file "$P/sa.key" \
      --service-cluster-ip-range 10.96.0.0/16 --cert-dir "$D/run/$name-certs" \
      --profiling=false --endpoint-reconciler-type none "$@" >"$D/log/$name.log" 2>&1 &
  echo $! > "$D/run/$name.pid"
  disown
}
apiserver kube-apiserver "$KUBE_PORT"
apiserver kube-apiserver-direct "$KUBE_DIRECT_PORT" --watch-cache=false
ready() { curl -sf --cacert "$P/ca.crt" --cert "$P/admin.crt" --key "$P/admin.key" "https://127.0.0.1:$1/readyz"; }
wait_for kube-apiserver 120 ready "$KUBE_PORT"
wait_for "kube-apiserver (direct)" 120 ready "$KUBE_DIRECT_PORT"

cat > "$D/env.sh" <<CONF
export KUBECONFIG=$D/admin.kubeconfig
CONF
echo "export KUBECONFIG=$D/admin.kubeconfig"
version="$(curl -sf --cacert "$P/ca.crt" --cert "$P/admin.crt" --key "$P/admin.key" "https://127.0.0.1:$KUBE_PORT/version" \
           | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p')"
echo "kube-apiserver $version on :$KUBE_PORT and :$KUBE_DIRECT_PORT (no watch cache); $("$BIN/etcd" --version | head -1) on :$ETCD_PORT"
