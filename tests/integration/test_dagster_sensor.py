"""A late correction for a closed day re-materializes that day through the late-data sensor.

Samples of one GPU for two closed days go through the real broker and a stream worker; both days are
materialized in a temporary Dagster instance. An allocation for the first day then arrives late: the
worker rewrites that day's windows, and the sensor requests exactly that day (and its closed month),
not the other day, whose materialization started after its facts were written. Running the request
rebuilds the day with the correction; after that the sensor has nothing to ask.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from dagster_project.definitions import defs
from dagster_project.defs.common.resources import ClickHouseResource, ExportResource, default_resources
from dagster_project.defs.late_data.sensors import late_data_sensor
from pipelines import events as ev
from pipelines import wire
from pipelines.producer import EventProducer
from pipelines.settings import Settings
from sql.client import get_client
from tests.integration.pipeline import Pipeline, wait_for

pytestmark = pytest.mark.integration

DAY, OTHER = datetime(2026, 11, 3, tzinfo=UTC), datetime(2026, 11, 4, tzinfo=UTC)
NODE, GPU = "late-node", "GPU-late-0"
OTHER_NODE, OTHER_GPU = "other-node", "GPU-other-0"  # the other day's GPU: a correction on NODE leaves it alone


@pytest.fixture
def pipeline(isolated_settings: Settings, tmp_path: Path) -> Iterator[Pipeline]:
    p = Pipeline(isolated_settings, tmp_path)
    yield p
    p.stop_all()


def _sample(node: str, gpu: str, t: datetime) -> ev.Envelope:
    return wire.validate(
        {
            "id": ev.event_id("gpu.sample", "c1", node, t),
            "source": "dcgm",
            "type": "gpu.sample",
            "time": t.isoformat(),
            "cluster": "c1",
            "data": {
                "node": node,
                "interval_s": 30,
                "gpus": [{"uuid": gpu, "index": 0, "model": "NVIDIA H100 80GB HBM3", "gr_engine_active": 0.5}],
            },
        }
    )


def _late_allocation(start: datetime, end: datetime) -> ev.Envelope:
    return wire.validate(
        {
            "id": ev.event_id("late-alloc", start),
            "source": "kubernetes",
            "type": "allocation.ended",
            "time": end.isoformat(),
            "cluster": "c1",
            "data": {
                "scheduler": "kubernetes",
                "job_id": "research/train-0",
                "node": NODE,
                "state": "ended",
                "start_time": start.isoformat(),
                "end_time": end.isoformat(),
                "outcome": "success",
                "device_ids": [GPU],
                "gpus": [{"kind": "gpu", "count": 1}],
                "owner": {"namespace": "research", "labels": {"team": "llm"}},
            },
        }
    )


def _prices(settings: Settings) -> None:
    """The reference data the cost assets need (an H100 rate, no shared costs)."""
    client = get_client(settings)
    try:
        client.insert(
            "pricing_rates",
            [["p1", "c1", datetime(2026, 1, 1, tzinfo=UTC), "USD", "H100", 2.5]],
            column_names=["event_id", "cluster", "effective_from", "currency", "gpu_model", "hourly_rate"],
        )
        client.insert(
            "pricing_shared",
            [["p1", "c1", datetime(2026, 1, 1, tzinfo=UTC), "USD", 0, 0, 0, 0, "spread"]],
            column_names=[
                "event_id",
                "cluster",
                "effective_from",
                "currency",
                "network",
                "storage",
                "support",
                "operations",
                "idle_policy",
            ],
        )
    finally:
        client.close()


def _team_seconds(settings: Settings, day: datetime) -> dict[str, float]:
    client = get_client(settings)
    try:
        rows = client.query(
            "SELECT if(kind = 'allocated', team, kind), sum(gpu_seconds) FROM gpu_usage_daily "
            "WHERE day = {day:Date} GROUP BY 1",
            parameters={"day": day.date()},
        ).result_rows
    finally:
        client.close()
    return {str(k): float(v) for k, v in rows}


def _requested(result: dg.SensorResult) -> list[tuple[str | None, str | None]]:
    return [(r.job_name, r.partition_key) for r in result.run_requests or []]


def _evaluate(settings: Settings, instance: dg.DagsterInstance, cursor: str | None) -> dg.SensorResult:
    with dg.build_sensor_context(
        instance=instance, cursor=cursor, resources={"clickhouse": ClickHouseResource.from_settings(settings)}
    ) as context:
        result = late_data_sensor(context)
    assert isinstance(result, dg.SensorResult)
    return result


def _run(
    settings: Settings,
    instance: dg.DagsterInstance,
    job_name: str,
    partition_key: str,
    tags: dict[str, str] | None = None,
) -> dg.ExecuteInProcessResult:
    """What the daemon launches for a run request: the code location's job, its checks included."""
    local = dg.Definitions(
        assets=defs.assets,
        asset_checks=defs.asset_checks,
        jobs=defs.jobs,
        resources={
            **default_resources(),
            "clickhouse": ClickHouseResource.from_settings(settings),
            "exports": ExportResource(out_dir=str(settings.home / "exports")),
        },
    )
    result = local.resolve_job_def(job_name).execute_in_process(
        partition_key=partition_key, instance=instance, tags=tags
    )
    assert result.success
    return result


def test_a_late_correction_rematerializes_its_closed_day(pipeline: Pipeline) -> None:
    settings = pipeline.settings
    _prices(settings)
    pipeline.start_worker(0)
    with dg.instance_for_test() as instance:
        first = _evaluate(settings, instance, None)  # nothing written yet: starts from the present
        assert _requested(first) == [] and first.cursor is not None

        with EventProducer(settings) as producer:
            for day, node, gpu in ((DAY, NODE, GPU), (OTHER, OTHER_NODE, OTHER_GPU)):
                for i in range(40):  # 08:00-08:20 of each day, nobody holding the GPU
                    producer.publish(_sample(node, gpu, day + timedelta(hours=8, seconds=30 * i)))
        pipeline.wait(timeout_s=120)
        for day in (DAY, OTHER):
            checked = _run(settings, instance, "daily_assets_job", day.date().isoformat())
            assert {e.metadata["partition"].value for e in checked.get_asset_check_evaluations()} == {
                day.date().isoformat()
            }  # each check ran on the run's partition
        before, other = _team_seconds(settings, DAY), _team_seconds(settings, OTHER)
        assert before == {"unallocated": pytest.approx(1200.0)}

        # both days changed after the cursor, but each was built after its facts were written: only
        # the month, which no run built yet, is asked for
        built = _evaluate(settings, instance, first.cursor)
        assert _requested(built) == [("monthly_assets_job", "2026-11-01")]

        with EventProducer(settings) as producer:  # the day is closed and built; its allocation arrives
            producer.publish(_late_allocation(DAY + timedelta(hours=8), DAY + timedelta(hours=8, minutes=10)))
        pipeline.wait(timeout_s=120)
        wait_for(lambda: "llm" in pipeline.gpu_hours("team", DAY, DAY + timedelta(days=1)), 30, "the correction")

        late = _evaluate(settings, instance, built.cursor)
        wanted = _requested(late)
        assert wanted == [("daily_assets_job", "2026-11-03"), ("monthly_assets_job", "2026-11-01")]
        assert int(late.cursor or 0) > int(built.cursor or 0)
        assert _team_seconds(settings, DAY) == before  # not rebuilt yet

        [daily] = [r for r in late.run_requests or [] if r.job_name == "daily_assets_job"]
        assert daily.partition_key is not None
        _run(settings, instance, daily.job_name or "", daily.partition_key, dict(daily.tags))
        assert _team_seconds(settings, DAY) == {"llm": pytest.approx(600.0), "unallocated": pytest.approx(600.0)}
        assert _team_seconds(settings, OTHER) == other

        assert _requested(_evaluate(settings, instance, late.cursor)) == []  # each change acts once
        # and from the older cursor, the day is not asked again: its run started after the change
        again = _evaluate(settings, instance, built.cursor)
        assert _requested(again) == [("monthly_assets_job", "2026-11-01")]
