#!/usr/bin/env bash
# Re-resolves requirements.lock, the exact versions scripts/setup.sh installs, after a change of the
# dependencies in pyproject.toml. Pins already in the lock are kept where they still fit
# (`--upgrade-package NAME` moves one). Needs uv (pip install uv).
set -euo pipefail
cd "$(dirname "$0")/.."
uv pip compile pyproject.toml --extra all --extra dev --python-version 3.11 \
  --python-platform x86_64-manylinux_2_28 --quiet -o requirements.lock "$@"
