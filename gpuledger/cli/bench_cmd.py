"""``gpuledger bench [--smoke] [--format json]``: throughput, freshness, replay, memory and query latency.

Runs against the configured Kafka and ClickHouse in isolated topics (``bench-<tag>.``) and
databases (``bench_<tag>``), removed afterwards. The full run rewrites the results section of
``docs/BENCHMARKS.md`` (between its ``results`` markers); ``--smoke`` is a small run for CI.
"""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

DOC = Path(__file__).resolve().parents[2] / "docs" / "BENCHMARKS.md"
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


class BenchFormat(StrEnum):
    table = "table"
    json = "json"


class BenchPhase(StrEnum):  # bench.run.PHASES
    stream = "stream"
    live = "live"
    sources = "sources"
    query = "query"


def bench(
    smoke: Annotated[bool, typer.Option("--smoke", help="small sizes (about a minute), for CI")] = False,
    format: Annotated[BenchFormat, typer.Option("--format", help="table or json")] = BenchFormat.table,
    keep: Annotated[bool, typer.Option("--keep", help="keep the benchmark's topics and databases")] = False,
    doc: Annotated[bool, typer.Option("--doc/--no-doc", help="full run: write docs/BENCHMARKS.md")] = True,
    profile: Annotated[
        Path | None,
        typer.Option(
            "--profile", help="write py-spy's collapsed stacks of the worker during the 23 h phase to this file"
        ),
    ] = None,
    workers: Annotated[
        int,
        typer.Option(
            "--workers", min=1, max=8, help="stream workers (one consumer group; the node topics have 8 partitions)"
        ),
    ] = 1,
    phase: Annotated[
        list[BenchPhase] | None,
        typer.Option(
            "--phase",
            help="run only this phase (repeatable): stream (throughput, freshness, replay, memory), "
            "live (CPU per sample live vs backlog), sources (collector parse + publish), query (monthly query); "
            "docs/BENCHMARKS.md is rewritten only by a full run of every phase",
        ),
    ] = None,
    live_nodes: Annotated[
        int | None,
        typer.Option(
            "--live-nodes",
            min=1,
            help="nodes (8 GPUs each) of the live phase, scraped every 10 s (default 256; with --smoke 4)",
        ),
    ] = None,
    live_seconds: Annotated[
        float | None,
        typer.Option(
            "--live-seconds",
            min=10,
            help="duration of the live part and size of the backlog (default 300; with --smoke 30)",
        ),
    ] = None,
    scrapes_per_message: Annotated[
        int | None,
        typer.Option(
            "--scrapes-per-message",
            min=1,
            help="the stream phase's history: a node's scrapes this many to a message, as the query_range "
            "collector sends them (default 32; 1: one scrape a message, as a live collector sends them)",
        ),
    ] = None,
) -> None:
    """Measure the pipeline on one set of synthetic messages and compare with the targets."""
    from bench.report import machine, markdown_table, table_rows
    from bench.run import PHASES, run
    from pipelines.settings import get_settings

    def say(text: str) -> None:
        sys.stderr.write(f"bench: {text}\n")

    phases = tuple(p.value for p in phase) if phase else PHASES
    results = run(
        get_settings(),
        smoke,
        say,
        keep=keep,
        profile_out=profile,
        workers=workers,
        phases=phases,
        live_nodes=live_nodes,
        live_seconds=live_seconds,
        scrapes_per_message=scrapes_per_message,
    )
    if format == BenchFormat.json:
        typer.echo(json.dumps(results, indent=2, sort_keys=True))
    else:
        for label, value, target, verdict in table_rows(results):
            typer.echo(f"{label:<50} {value:>24}  {target:<18} {verdict}")
    if profile is not None and profile.exists():
        from bench.profile import summarise

        for kind, entries in summarise(profile).items():
            for frame, share in entries:
                say(f"profile {kind}: {share:6.1f}  {frame}")
    if not smoke and doc and set(phases) != set(PHASES):
        say("not every phase ran: docs/BENCHMARKS.md is left as it is")
    elif not smoke and doc:
        write_doc(
            markdown_table(results)
            + "\n\nMachine:\n\n"
            + machine()
            + "\n\nRaw results:\n\n```json\n"
            + json.dumps(results, indent=2, sort_keys=True)
            + "\n```"
        )
        say(f"wrote {DOC}")


def write_doc(section: str, path: Path = DOC) -> None:
    """Replace the text between the results markers (or create the file with only that section)."""
    block = f"{BEGIN}\n{section}\n{END}"
    text = path.read_text() if path.exists() else f"# Benchmarks\n\n{BEGIN}\n{END}\n"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)


def register(app: typer.Typer) -> None:
    app.command(help="Benchmark the pipeline in isolated topics and databases.")(bench)
