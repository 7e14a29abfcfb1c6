"""The late-data sensor: re-runs closed days (with the daily job) and their months (with the monthly
job) when late data leaves them stale. Its own concept: it drives both the usage floor's daily job
and the costs' monthly job."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime

import dagster as dg
from clickhouse_connect.driver.client import Client

from dagster_project.defs.common.partitions import START_DATE
from dagster_project.defs.common.resources import ClickHouseResource
from dagster_project.defs.common.warehouse import rows
from dagster_project.defs.costs.schedules import monthly_assets_job
from dagster_project.defs.late_data.staleness import built_at, stale
from dagster_project.defs.usage.schedules import daily_assets_job
from pipelines.times import parse_day

# what each job rebuilds: a partition is stale until every one of them was built after its inputs changed
# (asset keys: the asset modules import this package's assets, so they cannot be imported here)
DAILY_ASSETS = [
    dg.AssetKey(k)
    for k in (
        "gpu_usage_daily",
        "queue_time_daily",
        "idle_waste_daily",
        "failure_waste_daily",
        "idle_causes_daily",
        "cost_allocation_daily",
        "fabric_health",
    )
]
MONTHLY_ASSETS = [
    dg.AssetKey(k)
    for k in ("effective_cluster_unit_cost_monthly", "chargeback_monthly", "chargeback_files", "capacity_plan")
]
LATE = {"gpuledger/reason": "late data"}


def late_run_requests(
    client: Client, instance: dg.DagsterInstance | None, since: int, today: date
) -> tuple[list[dg.RunRequest], int]:
    """Run requests for the closed days whose inputs changed after ``since`` (ns) and after the run
    that last built them started, and for their closed months likewise; and the new cursor (the
    newest change seen, acted on or already reflected)."""
    changed = {
        r["day"].isoformat(): int(r["changed"])
        for r in rows(client, "late_changes", {"since": since, "today": today})
        if r["day"] >= parse_day(START_DATE)
    }
    days = stale(changed, built_at(instance, DAILY_ASSETS, changed))
    by_month: dict[str, int] = defaultdict(int)
    for day, version in changed.items():
        if day[:7] < today.isoformat()[:7]:  # a closed month: its chargeback is built from its days
            by_month[day[:7] + "-01"] = max(by_month[day[:7] + "-01"], version)
    months = stale(by_month, built_at(instance, MONTHLY_ASSETS, by_month))
    requests = [
        dg.RunRequest(run_key=f"late:{d}:{changed[d]}", partition_key=d, job_name=daily_assets_job.name, tags=LATE)
        for d in days
    ]
    # in the same evaluation, after the days; Dagster may start them in any order (see the README)
    requests += [
        dg.RunRequest(run_key=f"late:{m}:{by_month[m]}", partition_key=m, job_name=monthly_assets_job.name, tags=LATE)
        for m in months
    ]
    return requests, max([since, *changed.values()])


@dg.sensor(
    jobs=[daily_assets_job, monthly_assets_job],
    minimum_interval_seconds=300,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def late_data_sensor(context: dg.SensorEvaluationContext, clickhouse: ClickHouseResource) -> dg.SensorResult:
    """Re-materialize the closed days (and months) that late data left stale — a correction of
    already-written windows, an attempt that fails days after it started — without a manual backfill.

    A day is requested when its facts or attempt records changed after the cursor *and* after the
    start of the run that last materialized it (``late_data/staleness.py``); the cursor is the newest
    change already seen, so each change is acted on once. On its first evaluation the sensor starts
    from the present (the schedules built the past).
    """
    with clickhouse.client() as client:
        if context.cursor is None:
            latest = rows(client, "late_changes_latest", {})[0]["latest"]
            return dg.SensorResult(run_requests=[], cursor=str(int(latest or 0)))
        requests, cursor = late_run_requests(client, _instance(context), int(context.cursor), datetime.now(UTC).date())
    return dg.SensorResult(run_requests=requests, cursor=str(cursor))


def _instance(context: dg.SensorEvaluationContext) -> dg.DagsterInstance | None:
    """The sensor's instance (the daemon always has one); a bare test context has none, and then no
    materialization is known: every changed day counts as stale."""
    try:
        return context.instance
    except dg.DagsterInvariantViolationError:
        return None


sensors = [late_data_sensor]
