#!/usr/bin/env bash
# The test command: installs what is missing, starts the local services, runs every test.
# Integration tests use KAFKA_BOOTSTRAP_SERVERS / CLICKHOUSE_URL when set (see README).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/lint.sh   # ruff check, ruff format --check, mypy over sources and tests
bash scripts/setup-tests.sh
if [ "${CI:-}" = "true" ]; then
  trap '.venv/bin/gpuledger down >/dev/null 2>&1 || true' EXIT
fi
.venv/bin/gpuledger up --workers 0
# pytest exits 5 when no test ran: that is a failure here, like any non-zero code.
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=15 "$@"
