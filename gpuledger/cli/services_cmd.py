"""``gpuledger up | down | status | migrate``."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from pipelines.settings import get_settings

console = Console()


def register(app: typer.Typer) -> None:
    app.command(help="Start the local services (Kafka, ClickHouse endpoint, stream workers); harmless twice.")(up)
    app.command(help="Stop exactly what `up` started (by pid file).")(down)
    app.command(help="Services, topics with end offsets, tables with row counts, dead letters.")(status)
    app.command(help="Apply the SQL migrations in sql/ddl (also done by `up`).")(migrate)
    app.command(help="Run one stream worker in the foreground (`up` starts them in the background).")(stream)
    app.command(help="Rebuild every fact from the raw tables (or, --from-kafka, from the log).")(replay)


def up(
    workers: Annotated[
        int | None, typer.Option(help="stream workers to start (default: GPULEDGER_STREAM_WORKERS)")
    ] = None,
) -> None:
    from infra.services import up as services_up

    settings = get_settings()
    with console.status("starting services") as spinner:
        report = services_up(settings, say=lambda msg: spinner.update(msg), workers=workers, stop_extra=True)
    for name in report.started:
        console.print(f"[green]started[/] {name}")
    for name in report.running:
        console.print(f"[dim]already running[/] {name}")
    for name in report.external:
        console.print(f"[cyan]external[/] {name}")
    for name in report.stopped:
        console.print(f"[yellow]stopped[/] {name}")
    for name, differ in report.mismatched.items():
        console.print(
            f"[yellow]{name} runs with other settings than these[/] ({'; '.join(differ)}): "
            "`gpuledger down` and `gpuledger up` restart it with these settings"
        )
    if report.topics_created:
        console.print(f"created {len(report.topics_created)} topics")
    if report.migrations:
        for name in report.migrations.applied:
            console.print(f"applied migration {name}")
        for name in report.migrations.changed:
            console.print(f"[yellow]migration file changed since it was applied:[/] {name}")
    console.print(
        f"Kafka {settings.bootstrap_servers} · ClickHouse {settings.clickhouse_endpoint_url}"
        f" · database {settings.clickhouse_database}"
    )


def down() -> None:
    from infra.services import down as services_down

    stopped = services_down(get_settings(), say=lambda msg: console.print(msg))
    if not stopped:
        console.print("nothing was running")


def status(
    format: Annotated[str, typer.Option("--format", help="table or json")] = "table",
) -> None:
    from infra.services import status as services_status

    result = services_status(get_settings())
    if format == "json":
        typer.echo(json.dumps(result, indent=2, default=str))
        return
    services = Table(title="services")
    for col in ("service", "pid", "answers", "address"):
        services.add_column(col)
    for name, info in result["services"].items():
        services.add_row(name, str(info.get("pid") or "-"), str(info.get("answers", "-")), str(info.get("address", "")))
    console.print(services)
    for name, info in result["services"].items():
        if info.get("other_settings"):
            console.print(f"[yellow]{name} runs with other settings than these[/]: {'; '.join(info['other_settings'])}")
    _print_counts("topics (end offset)", result["topics"])
    _print_counts("tables (rows)", result["tables"])
    _print_counts("dead letters by topic", result["dead_letters"])
    _print_counts("conflicting claims (GPU-windows, see `report conflicts`)", result.get("conflicts", {}))
    if result.get("quarantined"):
        held = Table(title="nodes in quarantine (attribution stopped on their input; fix it and re-send)")
        for col in ("cluster", "node", "since", "reason"):
            held.add_column(col)
        for q in result["quarantined"]:
            held.add_row(q["cluster"], q["node"], f"{q['since']:%Y-%m-%d %H:%M:%S}", q["reason"])
        console.print(held)


def _print_counts(title: str, counts: dict[str, int]) -> None:
    table = Table(title=title)
    table.add_column("name")
    table.add_column("count", justify="right")
    for name, count in counts.items():
        table.add_row(name, f"{count:,}")
    console.print(table)


def migrate() -> None:
    from infra.services import apply_migrations

    report = apply_migrations(get_settings())
    console.print(f"applied {len(report.applied)}, already applied {len(report.already)}")
    for name in report.changed:
        console.print(f"[yellow]changed since applied:[/] {name}")
    if report.reader:
        console.print(report.reader)


def stream(
    index: Annotated[int, typer.Option(help="worker number (for logs)")] = 0,
    loglevel: Annotated[str, typer.Option(help="crit, error, warn, info or debug")] = "warn",
) -> None:
    """Run one stream worker in the foreground (same consumer group as every other worker)."""
    from streams.__main__ import main as worker_main

    worker_main(["worker", "--index", str(index), "--loglevel", loglevel])


def replay(
    yes: Annotated[bool, typer.Option("--yes", help="confirm: empty the facts and rebuild them")] = False,
    from_kafka: Annotated[
        bool,
        typer.Option(
            "--from-kafka", help="also rebuild the raw tables from the topics (refused unless the log is whole)"
        ),
    ] = False,
) -> None:
    """Rebuild every fact: from the warehouse's raw tables (default; Kafka is not needed and no raw
    row is touched), or with --from-kafka from the topics' offset 0 (refused, changing nothing,
    when retention has removed the start of a topic or a worker elsewhere still consumes)."""
    from infra.services import replay as services_replay

    if not yes:
        raise typer.BadParameter("this empties the facts and rebuilds them; pass --yes")
    count = services_replay(get_settings(), from_kafka=from_kafka)
    origin = "the topics' offset 0" if from_kafka else "the raw tables"
    console.print(f"rebuilding the facts from {origin} with {count} worker(s); `gpuledger status` shows progress")
