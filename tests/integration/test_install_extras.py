"""A collector-only install (``pip install 'gpuledger[collect]'``) in a virtualenv of its own: the
collectors and a dry-run ingest work without the warehouse engine, Faust, Dagster or the API server,
and a command of another role says in one line which extra it needs."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
ABSENT = ("chdb", "dagster", "faust", "clickhouse_connect", "fastapi", "uvicorn", "pyarrow")


CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpuledger" / "collect-venv"


def _dependency_key() -> str:
    """What decides the third-party packages of the install: the interpreter, the project's declared
    dependencies and the pins."""
    digest = hashlib.sha256(sys.version.encode())
    for name in ("pyproject.toml", "requirements.lock"):
        digest.update((REPO / name).read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def collect_venv() -> Iterator[Path]:
    """The virtualenv after ``pip install 'gpuledger[collect]'`` of this checkout.

    The virtualenv is kept outside the clone and made anew whenever the interpreter, pyproject.toml
    or requirements.lock changed (their digest is its key), so its third-party packages are exactly
    those a fresh install resolves; the install command itself runs every time, and pip reinstalls
    gpuledger from the checkout then. A lock keeps two test runs on one machine from installing into
    it at once.
    """
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    venv, key = CACHE / "venv", _dependency_key()
    with open(CACHE.parent / "collect-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        made = CACHE / "key"
        if not made.exists() or made.read_text() != key:
            shutil.rmtree(CACHE, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
        done = subprocess.run(
            [
                str(venv / "bin/python"),
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "-c",
                str(REPO / "requirements.lock"),
                f"{REPO}[collect]",
            ],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        made.write_text(key)  # written only after an install succeeded
        yield venv


def gpuledger(venv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin/gpuledger"), *args], capture_output=True, text=True, timeout=120, cwd=venv.parent, check=False
    )


def test_no_other_role_is_installed(collect_venv: Path) -> None:
    probe = f"import importlib.util as u, json; print(json.dumps([m for m in {ABSENT!r} if u.find_spec(m)]))"
    found = subprocess.run(
        [str(collect_venv / "bin/python"), "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(found.stdout) == []


@pytest.mark.parametrize("collector", ["dcgm", "kubernetes", "slurm", "storage"])
def test_the_collectors_help(collect_venv: Path, collector: str) -> None:
    done = gpuledger(collect_venv, "collect", collector, "--help")
    assert done.returncode == 0, done.stderr
    assert "Usage" in done.stdout and collector in done.stdout


@pytest.mark.parametrize(
    ("source", "fixture"),
    [
        ("dcgm", "dcgm/exporter_4x_timestamps.prom"),
        ("dcgm", "dcgm/query_range_two_labelsets.json"),  # without pyarrow: decoded by orjson
        ("slurm", "slurm/sacct_v0041.json"),
        ("kubernetes", "kubernetes/pods_snapshot.json"),
    ],
)
def test_a_dry_run_ingest(collect_venv: Path, source: str, fixture: str) -> None:
    done = gpuledger(
        collect_venv,
        "ingest",
        source,
        "--file",
        str(REPO / "tests/fixtures" / fixture),
        "--cluster",
        "c1",
        "--dry-run",
        "--format",
        "json",
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["dry_run"] is True and summary["events"] > 0 and summary["dead_letters"] == 0


def test_a_command_of_another_role_names_its_extra(collect_venv: Path) -> None:
    done = gpuledger(collect_venv, "report", "gpu-hours", "--window", "2026-11")
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "pip install 'gpuledger[stream]'" in done.stderr, done.stderr
