"""The daily job: yesterday's usage, waste, cost allocation and fabric health, every morning (UTC)
(closed days that late data left stale are re-run by ``late_data/sensors.py``)."""

from __future__ import annotations

import dagster as dg

daily_assets_job = dg.define_asset_job(
    "daily_assets_job",
    selection=dg.AssetSelection.groups("usage", "waste", "costs_daily", "fabric"),
)

# At 02:00 UTC the newest daily partition: the day that just closed (late events up to then included).
daily_assets_schedule = dg.build_schedule_from_partitioned_job(
    daily_assets_job, name="daily_assets_schedule", hour_of_day=2, minute_of_hour=0
)


jobs = [daily_assets_job]
schedules = [daily_assets_schedule]
