"""Costs: the daily cost allocation and the monthly effective cluster unit cost."""

from __future__ import annotations

import dagster as dg

from dagster_project.defs.costs import assets, checks, schedules


def definitions() -> dg.Definitions:
    return dg.Definitions(
        assets=[assets.cost_allocation_daily, assets.effective_cluster_unit_cost_monthly],
        asset_checks=[checks.cost_allocation_daily_gpu_seconds_conserved, checks.cost_allocation_daily_money_conserved,
                      checks.cost_allocation_daily_no_negative_cost],
        jobs=schedules.jobs, schedules=schedules.schedules)
