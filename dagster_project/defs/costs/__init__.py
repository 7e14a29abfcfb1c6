"""Costs: the daily cost allocation and the monthly effective cluster unit cost.

Dagster is imported when the definitions are built, not with the package: the pure cost rule here
(``model``, ``monthly``, ``ranges``) also serves ``report gpu-hours`` and ``gpuledger serve``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import dagster as dg


def definitions() -> dg.Definitions:
    import dagster as dg

    from dagster_project.defs.costs import assets, checks, schedules

    return dg.Definitions(
        assets=[assets.cost_allocation_daily, assets.effective_cluster_unit_cost_monthly],
        asset_checks=[
            checks.cost_allocation_daily_gpu_seconds_conserved,
            checks.cost_allocation_daily_money_conserved,
            checks.cost_allocation_daily_no_negative_cost,
        ],
        jobs=schedules.jobs,
        schedules=schedules.schedules,
    )
