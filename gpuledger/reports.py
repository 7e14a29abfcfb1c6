"""The one query layer behind ``gpuledger report``, the HTTP API and the HTML dashboard.

A report is a named query from ``sql/queries`` plus what it accepts: the dimensions it can be
grouped by (one or several: ``team,model``), a row limit, and whether a business-unit scope can
see it. Every value reaches ClickHouse as a server-side parameter; a dimension is checked against
the report's list before it is sent.

A **business-unit scope** (an API token limited to one unit) sees only that unit's rows: the
query runs grouped by ``business_unit`` first and only that unit's groups are kept (capacity rows
— unallocated, unavailable — belong to no unit and are left out); reports without an owner
(queue, conflicts) are refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from gpuledger.windows import BadWindow, parse_window
from pipelines.clusters import EVERY_CLUSTER, ClusterScope
from pipelines.times import parse_iso
from sql import load_query
from sql.idle_causes import IDLE_CAUSE_RULES
from sql.values import plain

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client

KEY_SEPARATOR = "\x1f"  # between the values of several dimensions in a key (sql: '\x1F')
DIMENSIONS = (
    "team",
    "business_unit",
    "namespace",
    "account",
    "model",
    "job",
    "node",
    "gpu_model",
    "failure_reason",
    "cluster",
    "user",
    "queue",
    "workload_kind",
)
IDLE_DIMENSIONS = ("team", "business_unit", "node", "gpu_model")
UNIT_COST_DIMENSIONS = ("model", "team", "business_unit", "cluster")
IDLE_CAUSE_DIMENSIONS = ("team", "business_unit", "model", "job", "namespace", "node", "gpu_model", "cluster")
IDLE_SHARES = ("policy", "separate", "weighted", "even")


class BadRequest(ValueError):
    """A report asked for with a parameter it does not take (exit 2 in the CLI, 400 in the API)."""


class OutOfScope(Exception):
    """A business-unit scope asked for what it may not see (403 in the API)."""


@dataclass(frozen=True)
class Report:
    name: str
    query: str
    title: str
    dimensions: tuple[str, ...] = ()  # what --by takes; empty: no grouping choice
    default_by: str = ""
    limit: bool = False
    scoped_dimensions: tuple[str, ...] | None = None  # what a business-unit scope may group by (None: all)
    scope_column: str | None = None  # a row's business unit, for reports with fixed columns
    owned: bool = True  # False: rows belong to no business unit; a scope may not see the report
    extra: tuple[str, ...] = ()  # further parameters the report requires (unit-cost: unit)
    fixed: tuple[tuple[str, Any], ...] = ()  # parameters of the report's rules, not the caller's
    costed: bool = False  # each row carries its cost (dagster_project/defs/costs/ranges.py)
    labels: bool = False  # --by also takes label:<key>, a pod label of the attempt


REPORTS: dict[str, Report] = {
    r.name: r
    for r in (
        Report("gpu-hours", "gpu_hours", "GPU-hours", DIMENSIONS, "team", costed=True, labels=True),
        Report("failures", "failures", "failure burn", limit=True, scope_column="business_unit"),
        Report("idle", "idle", "idle", IDLE_DIMENSIONS, "team", scoped_dimensions=("team", "business_unit")),
        Report(
            "idle-causes",
            "idle_causes",
            "idle causes",
            IDLE_CAUSE_DIMENSIONS,
            "team",
            scoped_dimensions=("team", "business_unit", "model", "job", "namespace"),
            fixed=IDLE_CAUSE_RULES,
        ),
        Report("queue", "queue", "queue time", owned=False),
        Report("conflicts", "conflicts", "conflicting claims", owned=False),
        # fabric runs name hosts and jobs of every unit: a business-unit token may not list them
        Report("benchmarks", "benchmarks", "NCCL benchmark runs", owned=False),
        Report("unit-cost", "unit_cost", "cost per unit of output", UNIT_COST_DIMENSIONS, "model", extra=("unit",)),
    )
}


@dataclass
class Result:
    columns: list[str]
    records: list[dict[str, Any]] = field(default_factory=list)
    start: datetime | None = None
    end: datetime | None = None


def time_range(
    start: str | None = None,
    end: str | None = None,
    window: str | None = None,
    now: datetime | None = None,
    max_days: float | None = None,
) -> tuple[datetime, datetime]:
    """[start, end) from ``window`` or ``--from``/``--to`` (default: the last 30 days)."""
    now = now or datetime.now(UTC)
    if window is not None:
        if start is not None or end is not None:
            raise BadRequest("give either a window or from/to, not both")
        try:
            a, b = parse_window(window, now)
        except BadWindow as exc:
            raise BadRequest(str(exc)) from None
    else:
        a, b = parse_time(start, now - timedelta(days=30)), parse_time(end, now)
    if b <= a:
        raise BadRequest(f"to ({b.isoformat()}) must be after from ({a.isoformat()})")
    if max_days is not None and b - a > timedelta(days=max_days):
        raise BadRequest(f"the range is longer than {max_days:g} days")
    return a, b


def parse_time(text: str | None, default: datetime) -> datetime:
    if text is None:
        return default
    try:
        return parse_iso(text)
    except ValueError:
        raise BadRequest(f"not an ISO 8601 time: {text!r}") from None


def parse_by(report: Report, by: str | Sequence[str] | None) -> list[str]:
    """The report's dimensions from ``team`` / ``team,model`` / a list; checked against its list."""
    if not report.dimensions:
        if by:
            raise BadRequest(f"{report.name} takes no grouping")
        return []
    items = [b.strip() for b in (by.split(",") if isinstance(by, str) else by or [])] or [report.default_by]
    unknown = [b for b in items if b not in report.dimensions and not _label(report, b)]
    if unknown or "" in items:
        raise BadRequest(
            f"unknown grouping {','.join(unknown) or '(empty)'!r} for {report.name}: "
            f"one or several of {', '.join(report.dimensions)}{', label:<key>' if report.labels else ''}"
        )
    if len(set(items)) != len(items):
        raise BadRequest(f"a grouping is repeated: {','.join(items)}")
    return items


def _label(report: Report, dim: str) -> bool:
    """``label:<key>``: a pod label as a dimension, where the report takes them."""
    return report.labels and dim.startswith("label:") and bool(dim[len("label:") :].strip()) and "," not in dim


def parse_extra(report: Report, extra: dict[str, str | None] | None) -> dict[str, str]:
    """The report's further parameters (``unit`` of unit-cost): each it requires, none it does not."""
    given = {k: v for k, v in (extra or {}).items() if v is not None}
    unknown = sorted(set(given) - set(report.extra))
    if unknown:
        raise BadRequest(f"{report.name} takes no {', '.join(unknown)}")
    missing = [k for k in report.extra if not given.get(k)]
    if missing:
        raise BadRequest(f"{report.name} needs {', '.join(missing)}")
    return given


def run(
    client: Client,
    name: str,
    *,
    by: str | Sequence[str] | None = None,
    start: datetime,
    end: datetime,
    cluster: ClusterScope = EVERY_CLUSTER,
    limit: int = 50,
    business_unit: str | None = None,
    extra: dict[str, str | None] | None = None,
    idle: str | None = None,
) -> Result:
    """Rows of report ``name`` as records; several dimensions become one column each. GPU-hours rows
    carry their cost (``idle``: policy | separate | weighted | even, how idle capacity is charged)."""
    report = REPORTS[name]
    dims = parse_by(report, by)
    more = parse_extra(report, extra)
    share = parse_idle(report, idle)
    if business_unit is not None:
        return _scoped(client, report, dims, start, end, cluster, limit, business_unit, more, share)
    params: dict[str, Any] = {"start": start, "end": end, **cluster.sql_params(), **more, **dict(report.fixed)}
    if dims:
        params["by"] = ",".join(dims)
    if report.limit:
        params["limit"] = limit
    columns, rows = _query(client, report.query, params)
    if report.costed:
        columns, rows = _with_cost(client, columns, rows, dims, start, end, cluster, share)
    return _result(columns, rows, dims, start, end)


def parse_idle(report: Report, idle: str | None) -> str:
    """How a costed report charges idle capacity: ``policy`` (the pricing file's idle policy, the
    default), ``separate`` (its own row, ``__idle__``), ``weighted`` (shared by usage), ``even``."""
    if idle is None:
        return "policy"
    if not report.costed:
        raise BadRequest(f"{report.name} takes no idle option")
    if idle not in IDLE_SHARES:
        raise BadRequest(f"idle must be one of {', '.join(IDLE_SHARES)}, not {idle!r}")
    return idle


def _with_cost(
    client: Client,
    columns: list[str],
    rows: list[tuple[Any, ...]],
    dims: list[str],
    start: datetime,
    end: datetime,
    cluster: ClusterScope,
    idle: str,
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The rows with their cost columns; the idle and shared costs nobody took as rows of their own."""
    from dagster_project.defs.costs.ranges import IdleShare, RowCost, range_costs
    from pipelines.settings import get_settings

    if not columns:  # an empty answer without its column names: nothing was used, nothing cost
        return columns, rows
    share = cast("IdleShare", idle)  # checked by parse_idle
    costs = range_costs(client, start, end, dims, cluster.sql_value, get_settings().cluster, share)
    names = list(RowCost().record())
    out = [(*row, *costs.pop(str(row[0]), RowCost()).record().values()) for row in rows]
    blank = tuple(0.0 for _ in columns[1:])
    out += [(key, *blank, *cost.record().values()) for key, cost in sorted(costs.items())]
    return [*columns, *names], out


def _scoped(
    client: Client,
    report: Report,
    dims: list[str],
    start: datetime,
    end: datetime,
    cluster: ClusterScope,
    limit: int,
    unit: str,
    more: dict[str, str],
    idle: str = "policy",
) -> Result:
    if not report.owned:
        raise OutOfScope(f"{report.name} lists rows of every business unit; a token for {unit} may not read it")
    if report.scope_column is not None:
        params: dict[str, Any] = {"start": start, "end": end, **cluster.sql_params(), "limit": 1_000_000}
        columns, rows = _query(client, report.query, params)
        if not rows:  # an empty answer may come without its column names
            return _result(columns, [], dims, start, end)
        index = columns.index(report.scope_column)
        return _result(columns, [r for r in rows if r[index] == unit][:limit], dims, start, end)
    if not dims:  # a report without owner groups: nothing of another unit in it
        return run(client, report.name, start=start, end=end, cluster=cluster, limit=limit)
    allowed = report.scoped_dimensions or report.dimensions
    if any(d not in allowed and not _label(report, d) for d in dims):
        raise OutOfScope(f"a token for one business unit may group {report.name} by {', '.join(allowed)} only")
    wanted = dims if dims[0] == "business_unit" else ["business_unit", *[d for d in dims if d != "business_unit"]]
    columns, rows = _query(
        client,
        report.query,
        {"start": start, "end": end, **cluster.sql_params(), "by": ",".join(wanted), **more, **dict(report.fixed)},
    )
    if report.costed:
        columns, rows = _with_cost(client, columns, rows, wanted, start, end, cluster, idle)
    kept = []
    for row in rows:
        parts = str(row[0]).split(KEY_SEPARATOR)
        if parts[0] != unit:  # another unit's group, or a capacity row (__unallocated__ …)
            continue
        mine = dict(zip(wanted, parts, strict=True))
        kept.append((KEY_SEPARATOR.join(mine[d] for d in dims), *row[1:]))
    return _result(columns, kept, dims, start, end)


def _query(client: Client, name: str, params: dict[str, Any]) -> tuple[list[str], list[tuple[Any, ...]]]:
    result = client.query(load_query(name), parameters=params)
    return list(result.column_names), [tuple(r) for r in result.result_rows]


def _result(
    columns: list[str], rows: Sequence[tuple[Any, ...]], dims: list[str], start: datetime, end: datetime
) -> Result:
    if len(dims) <= 1 or not columns or columns[0] != "key":
        return Result(columns, [{c: plain(v) for c, v in zip(columns, row, strict=True)} for row in rows], start, end)
    out = Result([*dims, *columns[1:]], [], start, end)
    for row in rows:
        parts = str(row[0]).split(KEY_SEPARATOR)
        keys = parts if len(parts) == len(dims) else [parts[0]] * len(dims)  # a capacity row: __unallocated__
        out.records.append(
            {**dict(zip(dims, keys, strict=True)), **{c: plain(v) for c, v in zip(columns[1:], row[1:], strict=True)}}
        )
    return out
