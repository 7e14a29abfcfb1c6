"""``gpuledger --help`` and every subcommand's ``--help`` exit 0 and say what the command does; a bad
option or value exits 2 with the problem named on one line and no traceback. The top-level help and
the bad inputs run the installed console script (``.venv/bin/gpuledger``) as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from gpuledger.cli.main import app

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / ".venv" / "bin" / "gpuledger"
ENV = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}


def command_paths(group: typer.Typer, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths: list[tuple[str, ...]] = []
    for cmd in group.registered_commands:
        paths.append((*prefix, cmd.name or (cmd.callback.__name__.replace("_", "-") if cmd.callback else "")))
    for sub in group.registered_groups:
        assert sub.name and sub.typer_instance
        paths.append((*prefix, sub.name))
        paths += command_paths(sub.typer_instance, (*prefix, sub.name))
    return paths


def run(*args: str) -> subprocess.CompletedProcess[str]:
    assert SCRIPT.exists(), f"{SCRIPT} is missing: run bash scripts/setup.sh"
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=60, env=ENV, cwd=REPO)


def test_top_level_help_lists_every_command() -> None:
    done = run("--help")
    assert done.returncode == 0, done.stderr
    assert "Who used which GPU-seconds" in done.stdout
    for path in command_paths(app):
        if len(path) == 1:
            assert f" {path[0]} " in done.stdout, path


def test_every_subcommand_help_exits_0_and_explains_itself() -> None:
    """In-process on the same app object as the console script (one process start per command would
    take most of a minute on a small machine); the console script itself is run by the other tests."""
    paths = command_paths(app)
    assert {("report", "gpu-hours"), ("export", "chargeback"), ("ingest",), ("simulate",)} <= set(paths)
    runner = CliRunner()
    for path in paths:
        done = runner.invoke(app, [*path, "--help"], prog_name="gpuledger", env={"COLUMNS": "200"})
        assert done.exit_code == 0, (path, done.output)
        text = done.output
        assert f"Usage: gpuledger {' '.join(path)}" in text, (path, text[:200])
        body = [ln for ln in text.splitlines() if ln.strip() and "Usage:" not in ln and "─" not in ln]
        assert any(len(ln.strip()) > 20 and "--help" not in ln for ln in body), (path, text)


def test_demo_help_explains_itself() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gpuledger.cli.demo_cmd", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env=ENV,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    for option in ("--nodes", "--hours", "--seed", "--out", "--workers"):
        assert option in done.stdout
    assert "whole pipeline" in done.stdout


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (("report", "gpu-hours", "--bogus"), "No such option: --bogus"),
        (("report", "gpu-hours", "--by", "nope"), "error: unknown grouping 'nope' for gpu-hours"),
        (("report", "gpu-hours", "--window", "fortnight"), "error: window 'fortnight' is not one of"),
        (("report", "idle", "--by", "team,colour"), "error: unknown grouping 'colour' for idle"),
        (("report", "gpu-hours", "--from", "yesterday-ish"), "error: not an ISO 8601 time: 'yesterday-ish'"),
        (("export", "chargeback", "--period", "2026-13", "--out", "/tmp/x"), "error: --period must be YYYY-MM"),
        (("no-such-command",), "No such command"),
    ],
)
def test_bad_input_is_a_one_line_error_with_exit_2(args: tuple[str, ...], problem: str) -> None:
    done = run(*args)
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = [ln for ln in done.stderr.splitlines() if problem in ln]
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr and not done.stdout.strip()
