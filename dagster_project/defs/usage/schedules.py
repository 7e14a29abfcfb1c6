"""The daily job: yesterday's usage, waste, cost allocation and fabric health, every morning (UTC);
and the sensor that re-runs closed days (and their months) when late data changes them."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import dagster as dg
from clickhouse_connect.driver.client import Client

from dagster_project.defs.common.resources import ClickHouseResource
from dagster_project.defs.common.warehouse import rows
from dagster_project.defs.costs.schedules import monthly_assets_job

daily_assets_job = dg.define_asset_job(
    "daily_assets_job",
    selection=dg.AssetSelection.groups("usage", "waste", "costs_daily", "fabric"),
)


@dg.schedule(job=daily_assets_job, cron_schedule="0 2 * * *", execution_timezone="UTC")
def daily_assets_schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
    """At 02:00 UTC, rebuild the day that just closed (late events up to then are included)."""
    when = context.scheduled_execution_time
    assert when is not None
    day = (when - timedelta(days=1)).date().isoformat()
    return dg.RunRequest(run_key=day, partition_key=day)


def late_run_requests(client: Client, since: int, today: date) -> tuple[list[dg.RunRequest], int]:
    """Run requests for every closed day whose inputs changed after ``since`` (ns), and for the
    closed months above them; and the new cursor (the newest change seen)."""
    changed = rows(client, "late_changes", {"since": since, "today": today})
    requests: list[dg.RunRequest] = []
    months: dict[str, int] = {}
    for r in changed:
        day, version = r["day"], int(r["changed"])
        key = day.isoformat()
        requests.append(dg.RunRequest(run_key=f"late:{key}:{version}", partition_key=key,
                                      job_name=daily_assets_job.name, tags={"gpuledger/reason": "late data"}))
        month = day.replace(day=1)
        if month < today.replace(day=1):  # a closed month: its chargeback changes with its days
            months[month.isoformat()] = max(months.get(month.isoformat(), 0), version)
    requests += [dg.RunRequest(run_key=f"late:{key}:{version}", partition_key=key, job_name=monthly_assets_job.name,
                               tags={"gpuledger/reason": "late data"}) for key, version in sorted(months.items())]
    return requests, max([since, *(int(r["changed"]) for r in changed)])


@dg.sensor(jobs=[daily_assets_job, monthly_assets_job], minimum_interval_seconds=300,
           default_status=dg.DefaultSensorStatus.RUNNING)
def late_data_sensor(context: dg.SensorEvaluationContext, clickhouse: ClickHouseResource) -> dg.SensorResult:
    """Re-materialize the closed days (and months) that late data changed: an attempt that fails days
    after it started, a correction of already-written windows — without a manual backfill.

    The cursor is the newest input change (ns) already acted on; on its first evaluation the sensor
    starts from the present (the schedules built the past). Monthly runs come after the days in the
    same evaluation, but Dagster may run them in any order: the next daily change re-requests them.
    """
    with clickhouse.client() as client:
        if context.cursor is None:
            latest = rows(client, "late_changes_latest", {})[0]["latest"]
            return dg.SensorResult(run_requests=[], cursor=str(int(latest or 0)))
        requests, cursor = late_run_requests(client, int(context.cursor), datetime.now(UTC).date())
    return dg.SensorResult(run_requests=requests, cursor=str(cursor))


jobs = [daily_assets_job]
schedules = [daily_assets_schedule]
sensors = [late_data_sensor]
