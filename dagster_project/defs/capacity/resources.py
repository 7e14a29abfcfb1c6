"""Capacity resources: the warehouse and the targets."""

from __future__ import annotations

from dagster_project.defs.common.resources import CapacityResource, ClickHouseResource

__all__ = ["CapacityResource", "ClickHouseResource"]
