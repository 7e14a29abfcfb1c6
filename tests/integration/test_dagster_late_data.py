"""A failure that lands after its days were materialized reaches their waste and cost through the
late-data sensor, without a manual backfill."""

from __future__ import annotations

import time
from pathlib import Path

import dagster as dg
import pytest

from dagster_project.definitions import defs
from dagster_project.defs.common.resources import ClickHouseResource, PricingResource
from dagster_project.defs.exports.on_demand import ExportResult, export_chargeback
from dagster_project.defs.late_data.sensors import late_data_sensor
from pipelines.settings import Settings
from sql.client import get_client
from tests.integration.test_dagster_assets import load_fixture_rows

pytestmark = pytest.mark.integration
DAY = "2026-03-14"


def _daily(settings: Settings, day: str) -> None:
    assets = [
        a
        for a in defs.assets or []
        if isinstance(a, dg.AssetsDefinition) and isinstance(a.partitions_def, dg.DailyPartitionsDefinition)
    ]
    dg.materialize(
        assets,
        partition_key=day,
        resources={"clickhouse": ClickHouseResource.from_settings(settings), "pricing": PricingResource()},
    )


def _waste(settings: Settings) -> dict[str, float]:
    client = get_client(settings)
    try:
        rows = client.query(
            "SELECT job_id, sum(failed_gpu_seconds) FROM failure_waste_daily WHERE day = {day:Date} GROUP BY job_id",
            parameters={"day": DAY},
        ).result_rows
        return {str(job): float(seconds) for job, seconds in rows}
    finally:
        client.close()


def _retries_cost(settings: Settings) -> float:
    client = get_client(settings)
    try:
        return float(
            client.query(
                "SELECT sum(cost) FROM cost_allocation_daily WHERE day = {day:Date} AND term = 'retries'",
                parameters={"day": DAY},
            ).result_rows[0][0]
            or 0
        )
    finally:
        client.close()


def _evaluate(settings: Settings, cursor: str | None) -> dg.SensorResult:
    with dg.build_sensor_context(
        cursor=cursor, resources={"clickhouse": ClickHouseResource.from_settings(settings)}
    ) as context:
        result = late_data_sensor(context)
    assert isinstance(result, dg.SensorResult)
    return result


def _export(settings: Settings, out: Path) -> ExportResult:
    client = get_client(settings)
    try:
        return export_chargeback(client, "2026-03", out, "csv", None, "c1")
    finally:
        client.close()


def test_a_late_failure_rematerializes_the_days_it_ran_and_their_month(
    isolated_settings: Settings, tmp_path: Path
) -> None:
    load_fixture_rows(isolated_settings)
    _daily(isolated_settings, DAY)
    assert _export(isolated_settings, tmp_path / "first").changed_since is None
    assert "j3" not in _waste(isolated_settings)  # j3 (05:00 on the 14th → 02:00 on the 16th) succeeded
    retries_before = _retries_cost(isolated_settings)
    first = _evaluate(isolated_settings, None)
    assert first.run_requests == [] and first.cursor  # starts from the present
    assert _evaluate(isolated_settings, first.cursor).run_requests == []  # nothing changed since

    client = get_client(isolated_settings)
    try:  # days later, the scheduler's record of j3 says it failed
        client.command(
            "INSERT INTO job_attempts SELECT * REPLACE ({v:UInt64} AS version, 'failure' AS outcome, "
            "'app_error' AS failure_reason, 'FAILED' AS scheduler_state) FROM job_attempts FINAL "
            "WHERE job_id = 'j3'",
            parameters={"v": time.time_ns()},
        )
    finally:
        client.close()
    late = _evaluate(isolated_settings, first.cursor)
    wanted = sorted((r.job_name, r.partition_key) for r in late.run_requests or [])
    assert wanted == [
        ("daily_assets_job", "2026-03-14"),
        ("daily_assets_job", "2026-03-15"),
        ("daily_assets_job", "2026-03-16"),
        ("monthly_assets_job", "2026-03-01"),
    ]
    assert int(late.cursor or 0) > int(first.cursor or 0)
    assert _evaluate(isolated_settings, late.cursor).run_requests == []  # acted on once

    _daily(isolated_settings, DAY)  # what the run request runs
    assert _waste(isolated_settings)["j3"] == pytest.approx(19 * 3600.0)  # 05:00 → 24:00 of the 14th
    assert _retries_cost(isolated_settings) > retries_before  # and its cost is a retry cost now
    again = _export(isolated_settings, tmp_path / "again")
    assert again.changed_since is not None  # the closed month changed after it was exported: said so
    assert _export(isolated_settings, tmp_path / "third").changed_since is None  # nothing new since
