"""The monthly job: unit cost, chargeback and its files, capacity plan of the month that just closed."""

from __future__ import annotations

import dagster as dg

monthly_assets_job = dg.define_asset_job(
    "monthly_assets_job",
    selection=dg.AssetSelection.groups("costs_monthly", "exports", "capacity"),
)

# On the 2nd at 04:00 UTC (after the daily run of the month's last day) the newest monthly partition:
# the previous month (a partition exists once its month has closed).
monthly_assets_schedule = dg.build_schedule_from_partitioned_job(
    monthly_assets_job, name="monthly_assets_schedule", day_of_month=2, hour_of_day=4, minute_of_hour=0
)

jobs = [monthly_assets_job]
schedules = [monthly_assets_schedule]
