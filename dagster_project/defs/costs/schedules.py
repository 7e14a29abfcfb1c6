"""The monthly job: unit cost, chargeback and its files, capacity plan of the month that just closed."""

from __future__ import annotations

from datetime import timedelta

import dagster as dg

monthly_assets_job = dg.define_asset_job(
    "monthly_assets_job",
    selection=dg.AssetSelection.groups("costs_monthly", "exports", "capacity"),
)


@dg.schedule(job=monthly_assets_job, cron_schedule="0 4 2 * *", execution_timezone="UTC")
def monthly_assets_schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
    """On the 2nd at 04:00 UTC (after the daily run of the month's last day), the previous month."""
    when = context.scheduled_execution_time
    assert when is not None
    first = (when.replace(day=1) - timedelta(days=1)).date().replace(day=1)
    key = first.isoformat()
    return dg.RunRequest(run_key=key, partition_key=key)


jobs = [monthly_assets_job]
schedules = [monthly_assets_schedule]
