"""Usage: GPU-seconds per day and owner, and queue time."""

from __future__ import annotations

import dagster as dg

from dagster_project.defs.usage import assets, checks, schedules


def definitions() -> dg.Definitions:
    return dg.Definitions(
        assets=[assets.gpu_usage_daily, assets.queue_time_daily],
        asset_checks=[checks.gpu_usage_daily_gpu_seconds_conserved],
        jobs=schedules.jobs,
        schedules=schedules.schedules,
    )
