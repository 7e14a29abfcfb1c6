"""Fabric resources: the warehouse, and how far back and how strictly runs are compared."""

from __future__ import annotations

import dagster as dg

from dagster_project.defs.common.resources import ClickHouseResource


class FabricConfig(dg.Config):
    lookback_days: int = 30
    tolerance: float = 0.10  # flagged below (1 - tolerance) x baseline
    min_runs: int = 3


__all__ = ["ClickHouseResource", "FabricConfig"]
