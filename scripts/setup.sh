#!/usr/bin/env bash
# Installs everything gpuledger needs on a fresh Debian machine, idempotently and quickly the
# second time: Debian packages (Java 17, Maven, Prometheus, Chromium), the virtualenv at .venv with the
# project (every extra) and its dev tools at the versions of requirements.lock, the Kafka broker jars
# from Maven Central (infra/kafka/lib), then the optional tool chains of scripts/setup.d.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
command -v prometheus >/dev/null 2>&1 || need_apt+=(prometheus)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)  # the dashboard's browser test
# a real Slurm cluster for the Slurm collector's tests (infra/slurm/start.sh): daemons, accounting, its database
command -v slurmctld >/dev/null 2>&1 || need_apt+=(slurm-wlm slurmdbd munge mariadb-server)
command -v slurmrestd >/dev/null 2>&1 || need_apt+=(slurmrestd)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  # the Debian prometheus package may start a system service; gpuledger runs its own
  (systemctl stop prometheus >/dev/null 2>&1 || service prometheus stop >/dev/null 2>&1 || true)
fi

PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.gpuledger-deps
want="$(cat pyproject.toml requirements.lock | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing Python packages into .venv (every role: .[all,dev], versions from requirements.lock)"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -c requirements.lock -e '.[all,dev]'
  echo "$want" > "$stamp"
fi

if ! ls infra/kafka/lib/kafka_2.13-*.jar >/dev/null 2>&1; then
  echo "setup: fetching the Kafka broker jars with Maven"
  mvn -q -B -f infra/kafka/pom.xml dependency:copy-dependencies
fi
# Optional tool chains, each cached outside the clone (~/.cache/gpuledger) and skipped when current:
# the chart's renderer and validator, the FOCUS validator, ...
for step in scripts/setup.d/*.sh; do
  [ -e "$step" ] || continue
  bash "$step"
done
echo "setup: ready"
