"""Chargeback is monthly (the billing period)."""

from __future__ import annotations

from dagster_project.defs.common.partitions import month_partition_bounds, monthly_partitions

__all__ = ["month_partition_bounds", "monthly_partitions"]
