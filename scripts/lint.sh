#!/usr/bin/env bash
# The code gates: ruff's lint rules, ruff's formatting, the import contracts and mypy, over every source and test.
# Part of the test command (scripts/test.sh); each fails the run with what to fix.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check .
.venv/bin/ruff format --check . || { echo "lint: run .venv/bin/ruff format . to format these files" >&2; exit 1; }
.venv/bin/lint-imports --no-cache  # the floors and no import circles ([tool.importlinter], pyproject.toml)
.venv/bin/mypy pipelines gpuledger streams sql dagster_project infra bench tests
