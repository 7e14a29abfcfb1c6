"""Exports: the monthly chargeback (lines in cents) and its FinOps FOCUS 1.2 files per business unit."""

from __future__ import annotations

import dagster as dg

from dagster_project.defs.exports import assets, checks, schedules


def definitions() -> dg.Definitions:
    return dg.Definitions(
        assets=[assets.chargeback_monthly, assets.chargeback_files],
        asset_checks=[
            checks.chargeback_monthly_money_conserved,
            checks.chargeback_monthly_no_negative_cost,
            checks.chargeback_monthly_focus_rules_hold,
        ],
        jobs=schedules.jobs,
        schedules=schedules.schedules,
    )
