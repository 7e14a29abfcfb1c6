#!/usr/bin/env bash
# Installs what the main job (`gpuledger demo`) needs on a fresh Debian machine, idempotently and
# quickly the second time: Java 17 and Maven from Debian, the virtualenv at .venv with the project
# (every extra) and its dev tools at the versions of requirements.lock, and the Kafka broker jars from
# Maven Central (infra/kafka/lib). What only the tests need (Prometheus, Chromium, a Slurm cluster,
# kube-apiserver, helm, the FOCUS validator) is installed by scripts/setup-tests.sh, which the test
# command runs.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
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
echo "setup: ready"
