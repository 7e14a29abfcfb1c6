"""Daily and monthly partitions (UTC). Every partitioned asset rebuilds exactly its partition.

A partition exists once its period has closed (Dagster's default ``end_offset=0``): the newest daily
partition is yesterday, the newest monthly one last month. The schedules come from the partitioned
jobs (``build_schedule_from_partitioned_job``), which run the newest partition at each tick.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

import dagster as dg

from pipelines.times import day_bounds, month_bounds, parse_day

# the first day gpuledger keeps facts for
START_DATE = "2025-01-01"
daily_partitions = dg.DailyPartitionsDefinition(start_date=START_DATE)
monthly_partitions = dg.MonthlyPartitionsDefinition(start_date=START_DATE)

# the daily job runs at 02:00 UTC (``usage/schedules.py``): a daily asset not materialized between
# 02:00 and 04:00 UTC is overdue until it is (evaluated by the daemon's freshness loop)
daily_freshness = dg.FreshnessPolicy.cron(deadline_cron="0 4 * * *", lower_bound_delta=timedelta(hours=2))


def day_partition_bounds(partition_key: str) -> tuple[date, datetime, datetime]:
    """A daily partition's key ``"2026-03-01"`` → the day and its ``[start, end)`` in UTC."""
    day = parse_day(partition_key)
    return (day, *day_bounds(day))


def month_partition_bounds(partition_key: str) -> tuple[date, datetime, datetime]:
    """A monthly partition's key ``"2026-03-01"`` (or a period ``"2026-03"``) → the month's first day
    and its ``[start, end)`` in UTC."""
    first = parse_day(partition_key[:7] + "-01")
    return (first, *month_bounds(first))
