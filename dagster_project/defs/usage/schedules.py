"""The daily job: yesterday's usage, waste, cost allocation and fabric health, every morning (UTC)."""

from __future__ import annotations

from datetime import timedelta

import dagster as dg

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


jobs = [daily_assets_job]
schedules = [daily_assets_schedule]
