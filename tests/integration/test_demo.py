"""``gpuledger demo`` at a small size on the real local services: every output file is written, the
dashboard's numbers equal ``gpuledger report`` for the same period and cluster, and a second run
gives the same numbers (deterministic event ids, idempotent facts and assets)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dagster_project.defs.exports.files import read
from tests.integration.demo_helpers import Demo, app, demo_env, embedded_data, run_demo

pytestmark = pytest.mark.integration
CLUSTER = "demo-2n2h-s3"
BU_FILES = ("csv", "parquet")


def test_demo_writes_everything_and_reconciles_with_reports(
    demo: Demo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, first = demo.out, demo.stdout
    with demo_env(demo.settings, monkeypatch) as runner:
        assert f"cluster {CLUSTER}" in first and "effective unit cost 2026-11" in first
        data = embedded_data(out / "dashboard.html")
        report = runner.invoke(
            app(),
            [
                "report",
                "gpu-hours",
                "--by",
                "business_unit",
                "--from",
                data["start"],
                "--to",
                data["end"],
                "--cluster",
                CLUSTER,
                "--format",
                "json",
            ],
        )
        assert report.exit_code == 0, report.output
        failures = runner.invoke(
            app(),
            [
                "report",
                "failures",
                "--from",
                data["start"],
                "--to",
                data["end"],
                "--cluster",
                CLUSTER,
                "--format",
                "json",
                "--limit",
                "1000",
            ],
        )
        assert failures.exit_code == 0, failures.output
        run_demo(tmp_path / "again")
        again = embedded_data(tmp_path / "again" / "dashboard.html")
    assert (data["start"], data["end"]) == ("2026-11-02T00:00:00Z", "2026-11-02T02:00:00Z")
    rows = json.loads(report.output)
    assert [r["key"] for r in rows] == [r["key"] for r in data["gpu_hours_by_business_unit"]]
    for mine, theirs in zip(data["gpu_hours_by_business_unit"], rows, strict=True):  # the same query: same rows
        assert {k: v for k, v in mine.items() if k not in ("key", "currency")} == pytest.approx(
            {k: v for k, v in theirs.items() if k not in ("key", "currency")}, rel=1e-12
        )
        assert mine.get("currency") == theirs["currency"]
    for col in ("allocated_gpu_hours", "busy_gpu_hours", "idle_gpu_hours", "failed_gpu_hours"):
        assert sum(r[col] for r in rows if not r["key"].startswith("__")) == pytest.approx(data["totals"][col])
    assert data["totals"]["capacity_gpu_hours"] == pytest.approx(2 * 8 * 2)  # 2 nodes x 8 GPUs x 2 h
    assert data["totals"]["allocated_gpu_hours"] > 0 and data["totals"]["cost"] > 0
    failed = json.loads(failures.output)
    assert sum(r["failed_gpu_hours"] for r in failed) == pytest.approx(data["totals"]["failed_gpu_hours"])
    assert again["totals"] == pytest.approx(data["totals"]) and again["failures"] == data["failures"]
    _assert_files(out, [r["key"] for r in rows if not r["key"].startswith("__")])
    _assert_energy(out, rows)
    # the dashboard's idle causes explain exactly the idle of report gpu-hours; unobserved beside it
    causes = {r["cause"]: r["idle_gpu_hours"] for r in data["idle_causes"]}
    assert sum(v for c, v in causes.items() if c != "unobserved") == pytest.approx(
        data["totals"]["idle_gpu_hours"], abs=1e-6
    )
    assert causes.get("unobserved", 0.0) == pytest.approx(data["totals"]["unobserved_gpu_hours"], abs=1e-6)
    assert causes.get("startup", 0.0) > 0  # the demo's attempts start idle
    assert "## Why allocated GPUs sat idle" in (out / "sre-failures.md").read_text()


def _assert_energy(out: Path, rows: list[dict[str, float]]) -> None:
    """Every GPU-second's energy reaches the chargeback (owners' lines and the shared idle), priced
    and weighed at the demo's 0.12 per kWh and 350 g per kWh."""
    kwh = sum(r["energy_kwh"] for r in rows)
    assert kwh > 2 * 8 * 2 * 0.05  # 32 GPU-hours, none of them below 50 W
    _, lines = read(out / "focus-chargeback-2026-11.csv")
    gpu_lines = [r for r in lines if r["x_CostTerm"] in ("compute", "retries", "idle")]
    assert sum(float(r["x_EnergyKwh"]) for r in gpu_lines) == pytest.approx(kwh, rel=1e-6)
    for r in gpu_lines:
        assert float(r["x_EnergyCost"]) == pytest.approx(float(r["x_EnergyKwh"]) * 0.12, abs=1e-6)
        assert float(r["x_CarbonKg"]) == pytest.approx(float(r["x_EnergyKwh"]) * 0.35, abs=1e-6)


def _assert_files(out: Path, units: list[str]) -> None:
    sre = (out / "sre-failures.md").read_text()
    assert sre.startswith(f"# SRE failure report — cluster {CLUSTER}") and "## Failure burn by reason" in sre
    for fmt in BU_FILES:
        _, everything = read(out / f"focus-chargeback-2026-11.{fmt}")
        assert any(r["BillingAccountId"] == CLUSTER for r in everything)
        for bu in units:
            _, bu_rows = read(out / f"focus-chargeback-2026-11-{bu}.{fmt}")
            assert bu_rows and all(r["SubAccountId"] == bu for r in bu_rows)
    assert json.loads((out / "demo.json").read_text())["cluster"] == CLUSTER
