"""The CLI is a shell over the library: nothing outside it imports it, and its errors stay its own."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("pipelines", "streams", "sql", "dagster_project", "infra", "bench")


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return out


def test_no_library_module_imports_the_cli() -> None:
    offenders = [
        str(path.relative_to(REPO))
        for package in PACKAGES
        for path in (REPO / package).rglob("*.py")
        if "cli" not in path.relative_to(REPO).parts[1:2]
        and any(m == "gpuledger.cli" or m.startswith("gpuledger.cli.") for m in _imports(path))
    ]
    assert offenders == []


def test_a_report_asked_for_wrongly_exits_2_with_one_line() -> None:
    argv = ["report", "gpu-hours", "--by", "team", "--window", "7d", "--from", "2026-11-01"]
    done = subprocess.run(
        [sys.executable, "-m", "gpuledger.cli.main", *argv], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == "error: give either a window or from/to, not both\n"
