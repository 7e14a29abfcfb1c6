"""Capacity: how many GPUs the target work needs after failures, idle time and retries."""

from __future__ import annotations

import dagster as dg

from dagster_project.defs.capacity import assets, checks, schedules


def definitions() -> dg.Definitions:
    return dg.Definitions(
        assets=[assets.capacity_plan],
        asset_checks=[checks.capacity_plan_ratios_in_range],
        jobs=schedules.jobs,
        schedules=schedules.schedules,
    )
