"""Cost allocation is daily; the unit cost monthly."""

from __future__ import annotations

from dagster_project.defs.common.partitions import (
    daily_freshness,
    daily_partitions,
    day_partition_bounds,
    month_partition_bounds,
    monthly_partitions,
)

__all__ = [
    "daily_freshness",
    "daily_partitions",
    "day_partition_bounds",
    "month_partition_bounds",
    "monthly_partitions",
]
