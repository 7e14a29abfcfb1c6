"""`gpuledger ingest --dry-run`: summary JSON, dead letters without failing, exit 2 on a foreign format."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.parsers.registry import Source, parse_file

FIX = Path(__file__).resolve().parents[1] / "fixtures"
GPULEDGER = [sys.executable, "-m", "gpuledger.cli.main"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GPULEDGER, *args], capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize(
    ("source", "path"),
    [
        ("dcgm", "dcgm/exporter_4x_timestamps.prom"),
        ("slurm", "slurm/sacct_v0041.json"),
        ("kubernetes", "kubernetes/watch_events.jsonl"),
        ("nccl", "nccl/all_reduce_2_13_root.log"),
        ("org", "reference/org.yaml"),
        ("pricing", "reference/pricing.yaml"),
    ],
)
def test_dry_run_prints_a_json_summary(source: str, path: str) -> None:
    done = run(
        "ingest", source, "--file", str(FIX / path), "--dry-run", "--format", "json", "--time", "2026-11-02T10:00:00Z"
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["events"] > 0 and summary["dry_run"] is True
    assert summary["dead_letters"] >= 0 and sum(summary["by_type"].values()) == summary["events"]


def test_bad_records_are_dead_letters_and_the_command_still_succeeds() -> None:
    done = run(
        "ingest",
        "dcgm",
        "--file",
        str(FIX / "dcgm/blanks_and_bad.prom"),
        "--dry-run",
        "--format",
        "json",
        "--time",
        "2026-11-02T10:00:00Z",
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["dead_letters"] > 0 and all(summary["dead_letter_reasons"])


@pytest.mark.parametrize(
    ("source", "path"),
    [
        ("slurm", "dcgm/exporter_3x_hostname.prom"),
        ("dcgm", "slurm/sacct_v0039.json"),
        ("pricing", "nccl/all_gather_2_18.log"),
    ],
)
def test_a_file_of_another_format_exits_2_with_one_line(source: str, path: str) -> None:
    done = run("ingest", source, "--file", str(FIX / path), "--dry-run")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in done.stderr


def test_missing_file_exits_2() -> None:
    done = run("ingest", "slurm", "--file", "/nonexistent/sacct.json", "--dry-run")
    assert done.returncode == 2 and done.stderr.startswith("error: ")


def test_ingesting_the_same_file_twice_gives_the_same_ids() -> None:
    for source, path in (
        (Source.slurm, "slurm/sacct_v0041.json"),
        (Source.kubernetes, "kubernetes/watch_events.jsonl"),
        (Source.storage, "storage/checkpoints.jsonl"),
    ):
        first = parse_file(source, FIX / path, "c1")
        second = parse_file(source, FIX / path, "c1")
        assert [e.id for e in first.events] == [e.id for e in second.events]
        assert len({e.id for e in first.events}) == len(first.events)
