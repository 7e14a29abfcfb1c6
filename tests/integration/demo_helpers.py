"""Run ``gpuledger demo`` as a subprocess against isolated settings (own database, topics and home),
read its outputs in-process, and stop the stream workers it started afterwards. ``Demo`` is one
finished run, shared by the tests that only read what it wrote (the ``demo`` fixture)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from gpuledger.cli import export_cmd, report_cmd
from infra.services import down
from pipelines.settings import Settings, reset_settings

REPO = Path(__file__).resolve().parents[2]
DATA = re.compile(r'<script type="application/json" id="data">(.*?)</script>', re.S)


def app() -> typer.Typer:
    root = typer.Typer()
    report_cmd.register(root)
    export_cmd.register(root, report_cmd.report_app)
    return root


@dataclass(frozen=True)
class Demo:
    """A finished ``run_demo``: its settings (database, topics, home), output directory and stdout."""

    settings: Settings
    out: Path
    stdout: str


@contextmanager
def demo_env(settings: Settings, monkeypatch: pytest.MonkeyPatch, workers: int = 0) -> Iterator[CliRunner]:
    """Environment for the isolated settings (the workers `up` starts inherit it), with ``workers``
    stream workers started in it; every worker of these settings is stopped after."""
    env = {
        "KAFKA_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
        "CLICKHOUSE_URL": settings.clickhouse_endpoint_url,
        "CLICKHOUSE_USER": settings.clickhouse_user,
        "CLICKHOUSE_PASSWORD": settings.clickhouse_password.get_secret_value(),
        "CLICKHOUSE_DATABASE": settings.clickhouse_database,
        "GPULEDGER_TOPIC_PREFIX": settings.topic_prefix,
        "GPULEDGER_HOME": str(settings.home),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    reset_settings()
    try:
        if workers:  # `gpuledger up` in its own process, as the demo starts them
            started = subprocess.run(
                [sys.executable, "-m", "gpuledger.cli.main", "up", "--workers", str(workers)],
                capture_output=True,
                text=True,
                timeout=120,
                cwd=REPO,
                check=False,
            )
            assert started.returncode == 0, f"{started.stdout}\n{started.stderr}"
        yield CliRunner()
    finally:
        down(settings)
        reset_settings()


def run_demo(out: Path, *args: str) -> str:
    """The demo in its own process (it starts stream workers, which outlive it until ``down``)."""
    argv = [
        sys.executable,
        "-m",
        "gpuledger.cli.demo_cmd",
        "--nodes",
        "2",
        "--hours",
        "2",
        "--seed",
        "3",
        "--out",
        str(out),
        *args,
    ]
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=600, cwd=REPO, env={**os.environ, "COLUMNS": "160"}
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return done.stdout


def embedded_data(dashboard: Path) -> dict[str, Any]:
    match = DATA.search(dashboard.read_text(encoding="utf-8"))
    assert match, "the dashboard embeds no data blob"
    return dict(json.loads(match.group(1).replace("<\\/", "</")))
