#!/usr/bin/env bash
# Installs what only the tests need, after scripts/setup.sh, idempotently (silent when current):
# Debian packages (Prometheus for the collector's tests, Chromium and its driver for the dashboard's browser tests, a
# Slurm cluster with accounting for the Slurm collector's tests), then the tool chains of
# scripts/test-setup.d, each cached outside the clone (~/.cache/gpuledger) and skipped when current:
# helm and the manifest checker, the FOCUS validator, kube-apiserver and etcd.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v prometheus >/dev/null 2>&1 || need_apt+=(prometheus)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)  # the dashboard's browser tests
command -v chromedriver >/dev/null 2>&1 || need_apt+=(chromium-driver)  # selenium's driver for the served dashboard
# a real Slurm cluster for the Slurm collector's tests (infra/slurm/start.sh): daemons, accounting, its database
command -v slurmctld >/dev/null 2>&1 || need_apt+=(slurm-wlm slurmdbd munge mariadb-server)
command -v slurmrestd >/dev/null 2>&1 || need_apt+=(slurmrestd)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup-tests: installing Debian packages: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  # the Debian prometheus package may start a system service; the tests run their own
  (systemctl stop prometheus >/dev/null 2>&1 || service prometheus stop >/dev/null 2>&1 || true)
fi

for step in scripts/test-setup.d/*.sh; do
  [ -e "$step" ] || continue
  bash "$step"
done
echo "setup-tests: ready"
