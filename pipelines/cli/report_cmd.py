"""``gpuledger report …``: named queries from ``sql/queries`` rendered as table, JSON or CSV.

Every value reaches ClickHouse as a server-side parameter; a filter such as ``--cluster "x' OR 1"``
is just a cluster name that matches nothing.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from pipelines.cli.main_errors import UsageFailure
from pipelines.settings import get_settings
from sql import load_query
from sql.client import get_client
from sql.values import plain

report_app = typer.Typer(help="Reports on GPU-hours, failures, queue time, idle capacity, conflicting claims "
                              "and benchmarks.",
                         no_args_is_help=True)


class By(StrEnum):
    team = "team"
    business_unit = "business_unit"
    namespace = "namespace"
    account = "account"
    model = "model"
    job = "job"
    node = "node"
    gpu_model = "gpu_model"
    failure_reason = "failure_reason"
    cluster = "cluster"
    user = "user"
    queue = "queue"
    workload_kind = "workload_kind"


class IdleBy(StrEnum):
    team = "team"
    business_unit = "business_unit"
    node = "node"
    gpu_model = "gpu_model"


class Format(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


FromOpt = Annotated[str | None, typer.Option("--from", help="start, ISO 8601 (default: 30 days ago)")]
ToOpt = Annotated[str | None, typer.Option("--to", help="end, exclusive, ISO 8601 (default: now)")]
ClusterOpt = Annotated[str | None, typer.Option(help="only this cluster")]
FormatOpt = Annotated[Format, typer.Option("--format", help="table, json or csv")]


def parse_time(text: str | None, default: datetime) -> datetime:
    if text is None:
        return default
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageFailure(f"not an ISO 8601 time: {text!r}") from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def time_range(start: str | None, end: str | None) -> tuple[datetime, datetime]:
    now = datetime.now(UTC)
    a, b = parse_time(start, now - timedelta(days=30)), parse_time(end, now)
    if b <= a:
        raise UsageFailure(f"--to ({b.isoformat()}) must be after --from ({a.isoformat()})")
    return a, b


def run_query(name: str, params: dict[str, Any]) -> tuple[list[str], list[tuple[Any, ...]]]:
    client = get_client(get_settings())
    try:
        result = client.query(load_query(name), parameters=params)
        return list(result.column_names), [tuple(r) for r in result.result_rows]
    finally:
        client.close()


def emit(columns: list[str], rows: list[tuple[Any, ...]], fmt: Format, title: str) -> None:
    records = [{c: plain(v) for c, v in zip(columns, row, strict=True)} for row in rows]
    if fmt == Format.json:
        typer.echo(json.dumps(records, indent=2))
    elif fmt == Format.csv:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        for rec in records:
            writer.writerow({k: json.dumps(v) if isinstance(v, list) else v for k, v in rec.items()})
        sys.stdout.write(buf.getvalue())
    else:
        table = Table(title=title)
        for c in columns:
            table.add_column(c, justify="right" if rows and _is_number(rows[0][columns.index(c)]) else "left")
        for rec in records:
            table.add_row(*[_cell(v) for v in rec.values()])
        Console().print(table)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)


def _cell(value: Any) -> str:
    """A table cell: floats to 3 decimals, lists (nodes, hosts) comma-joined, None as empty."""
    if isinstance(value, float):
        return f"{value:,.3f}"
    if isinstance(value, list):
        return ",".join(map(str, value))
    return "" if value is None else str(value)


@report_app.command("gpu-hours")
def gpu_hours(
    by: Annotated[By, typer.Option(help="group rows by this owner dimension")] = By.team,
    start: FromOpt = None, end: ToOpt = None, cluster: ClusterOpt = None, format: FormatOpt = Format.table,
) -> None:
    """Allocated, busy and failed GPU-hours per group; unallocated capacity as `__unallocated__`."""
    a, b = time_range(start, end)
    cols, rows = run_query("gpu_hours", {"by": by.value, "start": a, "end": b, "cluster": cluster or ""})
    emit(cols, rows, format, f"GPU-hours by {by.value}, {a:%Y-%m-%d %H:%M} – {b:%Y-%m-%d %H:%M} UTC")


@report_app.command("failures")
def failures(
    start: FromOpt = None, end: ToOpt = None, cluster: ClusterOpt = None, format: FormatOpt = Format.table,
    limit: Annotated[int, typer.Option(help="rows to show")] = 50,
) -> None:
    """Which failed attempts burned the most GPU-hours, with lost work after the last checkpoint."""
    a, b = time_range(start, end)
    cols, rows = run_query("failures", {"start": a, "end": b, "cluster": cluster or "", "limit": limit})
    emit(cols, rows, format, "failure burn")


@report_app.command("queue")
def queue(start: FromOpt = None, end: ToOpt = None, cluster: ClusterOpt = None,
          format: FormatOpt = Format.table) -> None:
    """Queue time per scheduler queue, also as GPU-hours waited."""
    a, b = time_range(start, end)
    cols, rows = run_query("queue", {"start": a, "end": b, "cluster": cluster or ""})
    emit(cols, rows, format, "queue time")


@report_app.command("idle")
def idle(by: Annotated[IdleBy, typer.Option(help="group by")] = IdleBy.team, start: FromOpt = None,
         end: ToOpt = None, cluster: ClusterOpt = None, format: FormatOpt = Format.table) -> None:
    """Allocated-but-idle GPU-hours, and unallocated / unavailable capacity."""
    a, b = time_range(start, end)
    cols, rows = run_query("idle", {"by": by.value, "start": a, "end": b, "cluster": cluster or ""})
    emit(cols, rows, format, f"idle by {by.value}")


@report_app.command("conflicts")
def conflicts(start: FromOpt = None, end: ToOpt = None, cluster: ClusterOpt = None,
              format: FormatOpt = Format.table) -> None:
    """Claims beyond a GPU's capacity (conflicting scheduler data), scaled down and listed here."""
    a, b = time_range(start, end)
    cols, rows = run_query("conflicts", {"start": a, "end": b, "cluster": cluster or ""})
    emit(cols, rows, format, "conflicting claims")


@report_app.command("benchmarks")
def benchmarks(start: FromOpt = None, end: ToOpt = None, cluster: ClusterOpt = None,
               format: FormatOpt = Format.table) -> None:
    """nccl-tests runs: hosts, ranks, average bus bandwidth, pass/fail, NCCL version."""
    a, b = time_range(start, end)
    cols, rows = run_query("benchmarks", {"start": a, "end": b, "cluster": cluster or ""})
    emit(cols, rows, format, "NCCL benchmark runs")


def register(app: typer.Typer) -> None:
    app.add_typer(report_app, name="report")
