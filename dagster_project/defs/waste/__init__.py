"""Waste: idle capacity and failed work, per day."""

from __future__ import annotations

import dagster as dg

from dagster_project.defs.waste import assets, checks, schedules


def definitions() -> dg.Definitions:
    return dg.Definitions(
        assets=[assets.idle_waste_daily, assets.failure_waste_daily, assets.idle_causes_daily],
        asset_checks=[checks.failure_waste_daily_lost_within_failed, checks.idle_causes_daily_sum_to_idle],
        jobs=schedules.jobs,
        schedules=schedules.schedules,
    )
