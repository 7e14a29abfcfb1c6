"""Fabric health is daily."""

from __future__ import annotations

from dagster_project.defs.common.partitions import daily_freshness, daily_partitions, day_partition_bounds

__all__ = ["daily_freshness", "daily_partitions", "day_partition_bounds"]
