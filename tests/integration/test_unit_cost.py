"""Outputs as the denominator of the unit cost, end to end on the real services: the demo ingests
its simulated vLLM servers' token counters through Kafka, and ``report unit-cost`` gives each model
its cost per million tokens — its cost as the chargeback bills it, over the tokens its servers
produced — beside its cost per successful run, each equal to what the simulator's truth prices its
own state at."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dagster_project.defs.exports.files import read
from sql.client import get_client
from tests.integration.demo_helpers import REPO, Demo, app, demo_env

pytestmark = pytest.mark.integration
CLUSTER = "demo-2n2h-s3"
DAY = datetime(2026, 11, 2, tzinfo=UTC)


def gpuledger(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuledger.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        env={**os.environ, "COLUMNS": "160"},
        check=False,
    )


def unit_cost(runner: Any, unit: str) -> dict[str, dict[str, Any]]:
    result = runner.invoke(
        app(),
        [
            "report",
            "unit-cost",
            "--unit",
            unit,
            "--by",
            "model",
            "--cluster",
            CLUSTER,
            "--window",
            "2026-11-02",
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    return {r["key"]: r for r in json.loads(result.output)}


def test_cost_per_million_tokens_per_model(demo: Demo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the demo ingested the simulated vLLM servers' token counters too; a worker takes the records below
    with demo_env(demo.settings, monkeypatch, workers=1) as runner:
        truth = json.loads((demo.settings.home / "demo" / CLUSTER / "truth.json").read_text())
        client = get_client(demo.settings)
        try:
            some_job = client.query(
                "SELECT scheduler, job_id FROM job_attempts FINAL WHERE cluster = {c:String} ORDER BY job_id LIMIT 1",
                parameters={"c": CLUSTER},
            ).result_rows[0]
        finally:
            client.close()
        lines = [  # a job no fact names, and another unit of a known job
            json.dumps(
                {
                    "job_id": "ghost/pod-0",
                    "unit": "tokens_generated",
                    "quantity": 777,
                    "start": DAY.isoformat(),
                    "end": (DAY + timedelta(hours=1)).isoformat(),
                }
            ),
            json.dumps(
                {
                    "job_id": some_job[1],
                    "scheduler": some_job[0],
                    "unit": "samples",
                    "quantity": 5,
                    "start": DAY.isoformat(),
                    "end": (DAY + timedelta(hours=1)).isoformat(),
                }
            ),
        ]
        outputs = tmp_path / "outputs.jsonl"
        outputs.write_text("\n".join(lines) + "\n")
        for _ in range(2):  # the same records twice: counted once
            done = gpuledger("ingest", "outputs", "--file", str(outputs), "--cluster", CLUSTER, "--wait")
            assert done.returncode == 0, done.stdout + done.stderr
        tokens, generated = unit_cost(runner, "tokens"), unit_cost(runner, "tokens_generated")
        missing = gpuledger("report", "unit-cost", "--by", "model", "--window", "2026-11")
        assert missing.returncode == 2 and "--unit" in missing.stderr  # the month's unit cost has no groups
        month = runner.invoke(
            app(),
            [
                "report",
                "unit-cost",
                "--unit",
                "tokens",
                "--by",
                "model",
                "--period",
                "2026-11",
                "--cluster",
                CLUSTER,
                "--format",
                "json",
            ],
        )
        assert month.exit_code == 0, month.output
        assert {r["key"]: r["units"] for r in json.loads(month.output)} == {k: r["units"] for k, r in tokens.items()}
    _, focus = read(demo.out / "focus-chargeback-2026-11.csv")
    billed: dict[str, float] = defaultdict(float)
    for line in focus:
        if line["x_BusinessUnit"] != "__platform__":
            billed[line["x_Model"] or ""] += float(line["BilledCost"])
    served = truth["outputs_by_model"]
    assert served
    for model, made in served.items():
        row = tokens[model]
        assert row["units"] == pytest.approx(made["tokens_generated"] + made["tokens_prompt"])
        assert generated[model]["units"] == pytest.approx(made["tokens_generated"])
        assert float(row["cost"]) == pytest.approx(billed[model], abs=0.01 * len(focus))
        assert row["cost_per_million_units"] == pytest.approx(float(row["cost"]) / row["units"] * 1e6, rel=1e-3)
        # the simulator's own pricing of its own state: compute, idle, shared costs, per million tokens
        assert row["cost_per_million_units"] == pytest.approx(truth["cost_per_million_tokens"][model], rel=1e-6)
    assert set(truth["cost_per_million_tokens"]) == set(served)
    # every model's cost of the day, served or not, against the truth (the report rounds to the cent)
    assert {k: float(r["cost"]) for k, r in tokens.items() if float(r["cost"])} == pytest.approx(
        truth["cost_by_model"], abs=0.005
    )
    assert generated["unknown"]["units"] == pytest.approx(777 + served.get("unknown", {}).get("tokens_generated", 0))
    assert {k: r["units"] for k, r in tokens.items() if k not in served and k != "unknown"} == {
        k: 0 for k in tokens if k not in served and k != "unknown"
    }  # models without a server: no tokens
    ran = [r for r in tokens.values() if r["successful_runs"]]
    assert ran and all(
        r["cost_per_successful_run"] == pytest.approx(float(r["cost"]) / r["successful_runs"], rel=1e-3) for r in ran
    )
