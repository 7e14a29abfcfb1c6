"""Fabric: NCCL bus bandwidth history per node set, and the node sets below their baseline."""

from __future__ import annotations

import dagster as dg

from dagster_project.defs.fabric import assets, checks, schedules


def definitions() -> dg.Definitions:
    return dg.Definitions(
        assets=[assets.fabric_health],
        asset_checks=[checks.fabric_health_no_node_set_below_baseline],
        jobs=schedules.jobs,
        schedules=schedules.schedules,
    )
