"""``gpuledger report …``: named queries from ``sql/queries`` rendered as table, JSON or CSV.

Every value reaches ClickHouse as a server-side parameter; a filter such as ``--cluster "x' OR 1"``
is just a cluster name that matches nothing.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import sys
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from gpuledger import reports
from gpuledger.windows import WINDOW_HELP
from pipelines.clusters import ClusterScope, parse_cluster
from pipelines.settings import get_settings
from sql.client import get_client
from sql.values import plain

report_app = typer.Typer(
    help="Reports on GPU-hours, failures, queue time, idle capacity and its causes, "
    "conflicting claims, benchmarks and the cost per unit of output.",
    no_args_is_help=True,
)


class Format(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


FromOpt = Annotated[str | None, typer.Option("--from", help="start, ISO 8601 (default: 30 days ago)")]
ToOpt = Annotated[str | None, typer.Option("--to", help="end, exclusive, ISO 8601 (default: now)")]
WindowOpt = Annotated[str | None, typer.Option("--window", help=f"instead of --from/--to: {WINDOW_HELP}")]
ClusterOpt = Annotated[str | None, typer.Option(help="only this cluster")]
FormatOpt = Annotated[Format, typer.Option("--format", help="table, json or csv")]


def time_range(start: str | None, end: str | None, window: str | None = None) -> tuple[datetime, datetime]:
    return reports.time_range(start, end, window)


def report(
    name: str,
    *,
    by: str | None = None,
    start: str | None,
    end: str | None,
    window: str | None,
    cluster: ClusterScope,
    fmt: Format,
    limit: int = 50,
    extra: dict[str, str | None] | None = None,
    idle: str | None = None,
) -> None:
    """Run report ``name`` (``gpuledger.reports``) and print it."""
    a, b = time_range(start, end, window)
    reports.parse_by(reports.REPORTS[name], by)  # a bad grouping is a usage error before any connection
    reports.parse_extra(reports.REPORTS[name], extra)
    reports.parse_idle(reports.REPORTS[name], idle)
    client = get_client(get_settings())
    try:
        result = reports.run(client, name, by=by, start=a, end=b, cluster=cluster, limit=limit, extra=extra, idle=idle)
    finally:
        client.close()
    spec = reports.REPORTS[name]
    grouping = f" by {by or spec.default_by}" if spec.dimensions else ""
    emit_records(
        result.columns, result.records, fmt, f"{spec.title}{grouping}, {a:%Y-%m-%d %H:%M} – {b:%Y-%m-%d %H:%M} UTC"
    )


def emit(columns: list[str], rows: list[tuple[Any, ...]], fmt: Format, title: str) -> None:
    emit_records(columns, [{c: plain(v) for c, v in zip(columns, row, strict=True)} for row in rows], fmt, title)


def emit_records(columns: list[str], records: list[dict[str, Any]], fmt: Format, title: str) -> None:
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
        cells = [[_cell(rec[c]) for c in columns] for rec in records]
        table = Table(title=title)
        for c in columns:
            numeric = bool(records) and _is_number(records[0][c])
            table.add_column(c, justify="right" if numeric else "left", no_wrap=True, min_width=len(c))
        for row in cells:
            table.add_row(*row)
        # full column names and values on a pipe or a narrow terminal: as wide as the table needs
        needed = sum(max([len(c), *(len(r[i]) for r in cells)]) + 3 for i, c in enumerate(columns)) + 1
        Console(width=max(needed, len(title), shutil.get_terminal_size((80, 24)).columns)).print(table)


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
    by: Annotated[
        str,
        typer.Option(
            help="group by one or several of: " + ", ".join(reports.DIMENSIONS) + ", label:<key> (a pod label)"
        ),
    ] = "team",
    start: FromOpt = None,
    end: ToOpt = None,
    window: WindowOpt = None,
    cluster: ClusterOpt = None,
    format: FormatOpt = Format.table,
    idle: Annotated[
        str | None,
        typer.Option(
            help="idle capacity cost: policy (the pricing file's idle policy, default), separate (its own "
            "row __idle__), weighted (shared by usage) or even (shared equally)"
        ),
    ] = None,
) -> None:
    """Allocated, busy and failed GPU-hours per group and their cost (compute, failure waste, idle
    share, shared costs, total); unallocated capacity as `__unallocated__`."""
    report(
        "gpu-hours", by=by, start=start, end=end, window=window, cluster=parse_cluster(cluster), fmt=format, idle=idle
    )


@report_app.command("failures")
def failures(
    start: FromOpt = None,
    end: ToOpt = None,
    window: WindowOpt = None,
    cluster: ClusterOpt = None,
    format: FormatOpt = Format.table,
    limit: Annotated[int, typer.Option(help="rows to show")] = 50,
) -> None:
    """Which failed attempts burned the most GPU-hours, with lost work after the last checkpoint."""
    report("failures", start=start, end=end, window=window, cluster=parse_cluster(cluster), fmt=format, limit=limit)


@report_app.command("queue")
def queue(
    start: FromOpt = None,
    end: ToOpt = None,
    window: WindowOpt = None,
    cluster: ClusterOpt = None,
    format: FormatOpt = Format.table,
) -> None:
    """Queue time per scheduler queue, also as GPU-hours waited."""
    report("queue", start=start, end=end, window=window, cluster=parse_cluster(cluster), fmt=format)


@report_app.command("idle")
def idle(
    by: Annotated[str, typer.Option(help="group by one or several of: " + ", ".join(reports.IDLE_DIMENSIONS))] = "team",
    start: FromOpt = None,
    end: ToOpt = None,
    window: WindowOpt = None,
    cluster: ClusterOpt = None,
    format: FormatOpt = Format.table,
) -> None:
    """Allocated-but-idle GPU-hours, and unallocated / unavailable capacity."""
    report("idle", by=by, start=start, end=end, window=window, cluster=parse_cluster(cluster), fmt=format)


@report_app.command("idle-causes")
def idle_causes(
    by: Annotated[
        str, typer.Option(help="group by one or several of: " + ", ".join(reports.IDLE_CAUSE_DIMENSIONS))
    ] = "team",
    start: FromOpt = None,
    end: ToOpt = None,
    window: WindowOpt = None,
    cluster: ClusterOpt = None,
    format: FormatOpt = Format.table,
) -> None:
    """Why allocated GPUs sat idle: each group's idle GPU-hours split into checkpoint, storage_stall,
    fabric_degraded, startup, teardown and idle (the application's own), with their cost; unobserved beside."""
    report("idle-causes", by=by, start=start, end=end, window=window, cluster=parse_cluster(cluster), fmt=format)


@report_app.command("conflicts")
def conflicts(
    start: FromOpt = None,
    end: ToOpt = None,
    window: WindowOpt = None,
    cluster: ClusterOpt = None,
    format: FormatOpt = Format.table,
) -> None:
    """Claims beyond a GPU's capacity (conflicting scheduler data), scaled down and listed here."""
    report("conflicts", start=start, end=end, window=window, cluster=parse_cluster(cluster), fmt=format)


@report_app.command("benchmarks")
def benchmarks(
    start: FromOpt = None,
    end: ToOpt = None,
    window: WindowOpt = None,
    cluster: ClusterOpt = None,
    format: FormatOpt = Format.table,
) -> None:
    """nccl-tests runs: hosts, ranks, average bus bandwidth, pass/fail, NCCL version."""
    report("benchmarks", start=start, end=end, window=window, cluster=parse_cluster(cluster), fmt=format)


@report_app.command("dashboard")
def dashboard(
    out: Annotated[Path, typer.Option("--out", help="HTML file to write")] = Path("dashboard.html"),
    start: FromOpt = None,
    end: ToOpt = None,
    window: WindowOpt = None,
    cluster: Annotated[str | None, typer.Option(help="cluster (default GPULEDGER_CLUSTER)")] = None,
) -> None:
    """Write the finance dashboard (one self-contained HTML file) for a cluster and period."""
    from gpuledger.dashboard import data, html

    a, b = time_range(start, end, window)
    settings = get_settings()
    name = parse_cluster(cluster).name_or(settings.cluster)  # the page shows one cluster
    client = get_client(settings)
    try:
        collected = data.collect(client, name, a, b)
    finally:
        client.close()
    out.write_text(html.render(collected), encoding="utf-8")
    typer.echo(f"wrote {out} ({name}, {a:%Y-%m-%d %H:%M} – {b:%Y-%m-%d %H:%M} UTC)")


def register(app: typer.Typer) -> None:
    app.add_typer(report_app, name="report")
