"""Usage assets read and write the warehouse only."""

from __future__ import annotations

from dagster_project.defs.common.resources import ClickHouseResource

__all__ = ["ClickHouseResource"]
