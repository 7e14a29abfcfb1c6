"""The unit-cost request: which arguments combine. One rule for ``gpuledger report unit-cost`` and
``GET /api/v1/unit-cost``, so the CLI and the API accept and refuse the same combinations.

- Without ``unit``: the month's effective cluster unit cost, one row per cluster. The month is
  ``period`` (``YYYY-MM``) or ``window`` (inside one calendar month), default last month
  (``gpuledger.windows.billing_month``); ``cluster`` keeps one cluster's row. ``by``, ``from`` and
  ``to`` go with ``unit`` only.
- With ``unit``: the cost per unit of that output per ``by`` group over ``period``, ``window`` or
  ``from``/``to`` (one of them; none: the last 30 days), in ``cluster`` or every cluster.

A refused combination is ``reports.BadRequest``: exit 2 in the CLI, 400 in the API.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpuledger.reports import BadRequest
from gpuledger.windows import BadWindow, billing_month
from pipelines.clusters import ClusterScope, parse_cluster

DEFAULT_MONTH = "last-month"


def cli_flag(name: str) -> str:
    return f"--{name}"


def api_param(name: str) -> str:
    return name


@dataclass(frozen=True)
class MonthUnitCost:
    """The month's effective cluster unit cost."""

    month: str
    cluster: ClusterScope


@dataclass(frozen=True)
class OutputUnitCost:
    """The cost per unit of an output, per group, over a time range (``reports`` "unit-cost")."""

    unit: str
    by: str | None
    start: str | None
    end: str | None
    window: str | None
    cluster: ClusterScope


def unit_cost_request(
    *,
    period: str | None,
    window: str | None,
    unit: str | None,
    by: str | None,
    start: str | None,
    end: str | None,
    cluster: str | None,
    spell: Callable[[str], str],
) -> MonthUnitCost | OutputUnitCost:
    """The request the arguments make, or ``BadRequest`` naming them as ``spell`` does."""
    scope = parse_cluster(cluster)
    try:
        if unit is not None:
            if period is not None:
                if start is not None or end is not None or window is not None:
                    raise BadRequest(
                        f"give {spell('period')}, {spell('window')} or {spell('from')}/{spell('to')}, not several"
                    )
                window = billing_month(period, None, spell=spell)
            return OutputUnitCost(unit, by, start, end, window, scope)
        if start is not None or end is not None or by is not None:
            raise BadRequest(
                f"{spell('by')}, {spell('from')} and {spell('to')} go with {spell('unit')}; "
                f"the month's unit cost takes {spell('period')} or {spell('window')}"
            )
        return MonthUnitCost(billing_month(period, window, DEFAULT_MONTH, spell), scope)
    except BadWindow as exc:
        raise BadRequest(str(exc)) from None
