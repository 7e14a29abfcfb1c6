"""Daily and monthly partitions (UTC). Every partitioned asset rebuilds exactly its partition."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import dagster as dg

# the first day gpuledger keeps facts for; end_offset=1 includes the day / month in progress
START_DATE = "2025-01-01"
daily_partitions = dg.DailyPartitionsDefinition(start_date=START_DATE, end_offset=1)
monthly_partitions = dg.MonthlyPartitionsDefinition(start_date=START_DATE, end_offset=1)


def day_bounds(partition_key: str) -> tuple[date, datetime, datetime]:
    """``"2026-03-01"`` → the day and its ``[start, end)`` in UTC."""
    day = date.fromisoformat(partition_key)
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    return day, start, start + timedelta(days=1)


def month_bounds(partition_key: str) -> tuple[date, datetime, datetime]:
    """``"2026-03-01"`` (or ``"2026-03"``) → the month's first day and its ``[start, end)`` in UTC."""
    first = date.fromisoformat(partition_key[:7] + "-01")
    start = datetime(first.year, first.month, 1, tzinfo=UTC)
    end = (start + timedelta(days=32)).replace(day=1)
    return first, start, end


def partition_of(context: dg.AssetCheckExecutionContext) -> str:
    """The partition an asset check runs for (checks run in their asset's partitioned run)."""
    key = context.run.tags.get("dagster/partition")
    if not key:
        raise dg.Failure("this check runs with its asset's partition (no dagster/partition tag on the run)")
    return key
