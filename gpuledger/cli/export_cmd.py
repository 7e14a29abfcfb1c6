"""``gpuledger export chargeback`` (FinOps FOCUS 1.2 files) and ``gpuledger report unit-cost`` (the month's
effective unit cost, or with ``--unit`` the cost per unit of output per group: ``gpuledger.reports``).

Both read the month the Dagster assets materialized (``chargeback_monthly``,
``effective_cluster_unit_cost_monthly``); for a month they have not run for, the same numbers are
computed on the spot with the same code (``dagster_project/defs/exports/on_demand.py``). That code is
imported when a command runs, so other commands do not pay for loading Dagster.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from gpuledger import reports
from gpuledger.cli.main_errors import UsageFailure
from gpuledger.cli.report_cmd import Format, emit, report
from gpuledger.unit_cost import MonthUnitCost, cli_flag, unit_cost_request
from gpuledger.windows import BadWindow, billing_month
from pipelines.clusters import parse_cluster
from pipelines.cost_terms import TERMS
from pipelines.settings import get_settings
from sql.client import get_client

export_app = typer.Typer(
    help="Exports for finance: monthly chargeback as FinOps FOCUS 1.2 files.", no_args_is_help=True
)


class ExportFormat(StrEnum):
    csv = "csv"
    parquet = "parquet"


PeriodOpt = Annotated[str | None, typer.Option("--period", help="billing period, YYYY-MM (UTC)")]
MonthWindowOpt = Annotated[
    str | None, typer.Option("--window", help="instead of --period: last-month, month-to-date or YYYY-MM")
]


def _period(period: str | None, window: str | None = None) -> str:
    try:
        return billing_month(period, window, spell=cli_flag)
    except BadWindow as exc:
        raise UsageFailure(str(exc)) from None


@export_app.command("chargeback")
def chargeback(
    out: Annotated[Path, typer.Option("--out", help="directory to write the files into")],
    period: PeriodOpt = None,
    window: MonthWindowOpt = None,
    format: Annotated[ExportFormat, typer.Option("--format", help="csv or parquet")] = ExportFormat.csv,
    business_unit: Annotated[str | None, typer.Option("--business-unit", help="only this unit's file")] = None,
    cluster: Annotated[str | None, typer.Option(help="only this cluster's lines (default every cluster)")] = None,
) -> None:
    """Write the month's chargeback as FOCUS 1.2 rows: one file with every row (business units and the
    platform's unshared remainder, reconciling to the period's total) and one per business unit."""
    from dagster_project.defs.exports.on_demand import ExportRefused, export_chargeback

    month = _period(period, window)
    settings = get_settings()
    client = get_client(settings)
    try:
        result = export_chargeback(
            client, month, out, format.value, business_unit, settings.cluster, cluster=parse_cluster(cluster)
        )
    except ExportRefused as exc:
        raise UsageFailure(str(exc)) from None
    finally:
        client.close()
    typer.echo(
        f"{month}: total {result.total} {result.currency} = business units "
        f"{result.total - result.platform} + platform remainder {result.platform} "
        f"({result.lines} lines, from {result.source})"
    )
    if result.changed_since is not None:
        typer.echo(
            f"note: {month} changed after its export of {result.changed_since:%Y-%m-%d %H:%M:%S} UTC "
            "(late data or a late failure); these files replace it"
        )
    for path in result.paths:
        typer.echo(str(path))


def unit_cost(
    period: PeriodOpt = None,
    window: MonthWindowOpt = None,
    format: Annotated[Format, typer.Option("--format")] = Format.table,
    unit: Annotated[
        str | None,
        typer.Option(
            help="cost per million units of this output instead (tokens_generated, samples, … or a family: "
            "'tokens' takes every tokens_* unit), per --by group, beside the cost per successful run"
        ),
    ] = None,
    by: Annotated[
        str | None,
        typer.Option(
            help="with --unit: group by one or several of: "
            + ", ".join(reports.UNIT_COST_DIMENSIONS)
            + " (default model)"
        ),
    ] = None,
    start: Annotated[str | None, typer.Option("--from", help="with --unit, instead of --period: start")] = None,
    end: Annotated[str | None, typer.Option("--to", help="with --unit: end, exclusive")] = None,
    cluster: Annotated[str | None, typer.Option(help="only this cluster (default every cluster)")] = None,
) -> None:
    """The effective cluster unit cost of a month, with every term of
    (compute + network + storage + support + operations + idle + retries) / accepted workload units;
    with --unit, the cost per million units of an output (tokens, samples, requests) per group."""
    from dagster_project.defs.exports.on_demand import (
        SCALED_COLUMNS,
        UNIT_COST_COLUMNS,
        scaled_text,
        unit_cost_records,
    )

    asked = unit_cost_request(
        period=period, window=window, unit=unit, by=by, start=start, end=end, cluster=cluster, spell=cli_flag
    )
    if not isinstance(asked, MonthUnitCost):
        report(
            "unit-cost",
            by=asked.by,
            start=asked.start,
            end=asked.end,
            window=asked.window,
            cluster=asked.cluster,
            fmt=format,
            extra={"unit": asked.unit},
        )
        return
    month = asked.month
    settings = get_settings()
    client = get_client(settings)
    try:  # settings.cluster: the price book of a cluster without its own (a month computed on the spot)
        records = [
            r for r in unit_cost_records(client, month, settings.cluster) if asked.cluster.includes(r["cluster"])
        ]
    finally:
        client.close()
    if format != Format.table:
        columns = (*UNIT_COST_COLUMNS, *SCALED_COLUMNS)
        emit(list(columns), [tuple(r[c] for c in columns) for r in records], format, "unit cost")
        return
    table = [(r["cluster"], t, f"{r[t]} {r['currency']}") for r in records for t in (*TERMS, "total")]
    table += [(r["cluster"], "accepted units", f"{r['accepted_units']:g} {r['unit_kind']}") for r in records]
    table += [
        (
            r["cluster"],
            "unit cost",
            "n/a (no accepted units)" if r["unit_cost"] is None else f"{r['unit_cost']} {r['currency']}",
        )
        for r in records
    ]
    table += [
        (
            r["cluster"],
            f"unit cost per {r['unit_cost_per']}",
            "n/a" if r["unit_cost_scaled"] is None else f"{r['unit_cost_scaled']:,.2f} {r['currency']}",
        )
        for r in records
    ]
    emit(
        ["cluster", "term", "amount"],
        sorted(table, key=lambda row: row[0]),
        format,
        f"effective cluster unit cost, {month}",
    )
    for r in records:
        terms = " + ".join(f"{t} {r[t]}" for t in TERMS)
        typer.echo(
            f"{r['cluster']}: ({terms}) / {r['accepted_units']:g} {r['unit_kind']} = "
            f"{r['unit_cost'] if r['unit_cost'] is not None else 'n/a'} {r['currency']} = "
            f"{scaled_text(r)}"
        )


def register(app: typer.Typer, report_app: typer.Typer) -> None:
    """Add ``export`` to ``app`` and ``unit-cost`` to the ``report`` sub-app."""
    app.add_typer(export_app, name="export")
    if not any(c.name == "unit-cost" for c in report_app.registered_commands):
        report_app.command("unit-cost")(unit_cost)
