"""The cost of any time range, grouped by any report dimensions: the daily cost rule, applied to
the part of each UTC day the range covers, then rounded to cents as the monthly chargeback is.

Shared by ``report gpu-hours`` (and ``/api/v1/gpu-hours``) and the OpenCost-compatible
``/allocation`` endpoint. Nothing here prices anything itself: :func:`allocate_day` does, exactly
as for ``cost_allocation_daily``, with owners made of the report's dimensions (business unit, team
and model always among them, so a business unit's lines are the chargeback's), and
:func:`month_lines` turns the lines into cents per term and cluster. So the rows of a calendar
month add up, term by term, to the month's FOCUS BilledCost.

A range that is not whole UTC days (``24h``, ``--from 10:00``) is cut at midnight; each part is
costed on its own: GPU time at the rate in force when it was used, the idle capacity of that part
shared by the idle policy among the owners that used GPUs in that part, and the monthly shared
costs for exactly its seconds (a month's amount spread evenly over the month's seconds), shared by
the part's usage. Whole days give exactly the daily assets' lines.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from clickhouse_connect.driver.client import Client

from dagster_project.defs.costs.allocation import PLATFORM, CostLine, IdleShare, SharePolicy, allocate_day
from dagster_project.defs.costs.day_lines import OWNER_DIMENSIONS, fetch_day_segments, fetch_day_storage
from dagster_project.defs.costs.month_cents import ChargeLine, month_lines
from dagster_project.defs.costs.price_books import book_for, books_from_warehouse
from pipelines.times import floor_day

__all__ = [
    "IDLE_ROW",
    "PLATFORM_ROW",
    "IdleShare",
    "RowCost",
    "day_parts",
    "owner_dimensions",
    "range_costs",
    "range_lines",
    "row_key",
]
IDLE_ROW = "__idle__"  # idle capacity cost nobody was given (policy platform, or idle=separate)
PLATFORM_ROW = "__platform__"  # shared monthly costs nobody was given (no usage in a day, basis platform)
# a cost row's money, in cents: term -> field
FIELDS = {"compute": "compute_cost", "retries": "failure_waste_cost", "idle": "idle_cost"}
COST_FIELDS = ("compute_cost", "failure_waste_cost", "idle_cost", "shared_cost", "total_cost")
ZERO = Decimal("0.00")


@dataclass
class RowCost:
    """A row's cost in cents, by term; ``currency`` None when its clusters bill in several."""

    cents: dict[str, Decimal] = field(default_factory=lambda: dict.fromkeys(COST_FIELDS, ZERO))
    currencies: set[str] = field(default_factory=set)

    def add(self, term: str, cents: Decimal, currency: str) -> None:
        self.cents[FIELDS.get(term, "shared_cost")] += cents
        self.cents["total_cost"] += cents
        self.currencies.add(currency)

    def record(self) -> dict[str, Any]:
        """JSON-ready fields; a row billed in several currencies has no sums (``currency`` "mixed")."""
        mixed = len(self.currencies) > 1
        return {
            **{k: None if mixed else float(v) for k, v in self.cents.items()},
            "currency": "mixed" if mixed else next(iter(self.currencies), None),
        }


def owner_dimensions(dims: list[str], idle: IdleShare = "policy") -> tuple[str, ...]:
    """Business unit, team and model, then the report's other dimensions; with ``even`` idle sharing
    exactly the report's dimensions, so that every row (not every owner inside it) gets one part."""
    if idle == "even":
        return tuple(dims)
    return (*OWNER_DIMENSIONS, *[d for d in dims if d not in OWNER_DIMENSIONS])


def day_parts(start: datetime, end: datetime) -> list[tuple[datetime, datetime]]:
    """``[start, end)`` cut at every UTC midnight."""
    parts, a = [], start
    while a < end:
        midnight = floor_day(a) + timedelta(days=1)
        parts.append((a, min(midnight, end)))
        a = parts[-1][1]
    return parts


def range_lines(
    client: Client,
    start: datetime,
    end: datetime,
    dims: list[str],
    cluster: str,
    default_cluster: str,
    idle: IdleShare = "policy",
    policy: SharePolicy | None = None,
) -> tuple[list[ChargeLine], dict[str, str]]:
    """The range's cost lines in cents (owners: :func:`owner_dimensions`) and each cluster's currency."""
    end = min(end, datetime.now(UTC))  # seconds still to come cost nothing yet
    books = books_from_warehouse(client)
    owner = owner_dimensions(dims, idle)
    segments = fetch_day_segments(client, start, end, books, owner, cluster)
    storage = fetch_day_storage(client, start, end, owner, cluster)
    daily: list[tuple[str, CostLine]] = []
    currency: dict[str, str] = {}
    for a, b in day_parts(start, end):
        day = floor_day(a)
        for (d, c), segs in sorted(segments.items()):
            if d != day:
                continue
            book = book_for(books, c, default_cluster)
            currency[c] = book.currency
            alloc = allocate_day(a, b, segs, book, policy or SharePolicy(), storage.get((d, c), {}), idle)
            daily += [(c, ln) for ln in alloc.lines]
    return month_lines(daily), currency


def row_key(line: CostLine, dims: list[str], owner: tuple[str, ...]) -> str:
    """The report row a line belongs to: the key of its values of ``dims`` (as gpu_hours.sql joins them)."""
    if line.owner[0] == PLATFORM:
        return IDLE_ROW if line.term == "idle" else PLATFORM_ROW
    values = dict(zip(owner, line.owner, strict=False))
    return "\x1f".join(values[d] for d in dims)


def range_costs(
    client: Client,
    start: datetime,
    end: datetime,
    dims: list[str],
    cluster: str,
    default_cluster: str,
    idle: IdleShare = "policy",
) -> dict[str, RowCost]:
    """Row key -> its cost, for a report over ``[start, end)`` grouped by ``dims``."""
    lines, currency = range_lines(client, start, end, dims, cluster, default_cluster, idle)
    owner = owner_dimensions(dims, idle)
    out: dict[str, RowCost] = defaultdict(RowCost)
    for c in lines:
        out[row_key(c.line, dims, owner)].add(c.line.term, c.cents, currency[c.cluster])
    return dict(out)
