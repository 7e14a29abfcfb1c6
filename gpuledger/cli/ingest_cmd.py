"""``gpuledger ingest SOURCE --file PATH``: parse a file in that source's format and publish it.

The format is detected from the content (e.g. exposition text vs ``query_range`` JSON, pod list vs
watch events, sacct vs squeue). Bad records go to dead letters and the command still exits 0; a
file that is not that source's format at all exits 2 with a one-line reason.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from pipelines.parsers.base import ParseResult
from pipelines.parsers.registry import Source, default_cluster, input_files, parse_files, summary
from pipelines.settings import get_settings
from pipelines.times import from_epoch, utc_text

console = Console(stderr=True)


def ingest(
    source: Annotated[Source, typer.Argument(help="input kind")],
    file: Annotated[
        list[Path],
        typer.Option(
            "--file",
            "-f",
            help="file in that source's format (repeatable; a directory: its files; Kubernetes pods, "
            "ResourceClaims and ResourceSlices given together are read as one input)",
        ),
    ],
    cluster: Annotated[
        str | None,
        typer.Option(
            help="cluster name (default GPULEDGER_CLUSTER; org files without it apply to every cluster without its own)"
        ),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="parse and validate only; publish nothing")] = False,
    wait: Annotated[bool, typer.Option("--wait", help="return when every event is reflected in the facts")] = False,
    timeout: Annotated[float, typer.Option(help="seconds --wait may take")] = 600.0,
    node: Annotated[
        str | None,
        typer.Option(
            help="node name for inputs that carry none (mountstats, a dcgm "
            "scrape whose hostname label is the exporter's pod)"
        ),
    ] = None,
    at: Annotated[
        str | None, typer.Option("--time", help="sample or poll time for inputs that carry none (RFC 3339)")
    ] = None,
    collective: Annotated[
        str | None,
        typer.Option(
            help="nccl: the collective of a log that does not name it (all_reduce, or its binary all_reduce_perf)"
        ),
    ] = None,
    format: Annotated[str, typer.Option("--format", help="summary as table or json")] = "table",
) -> None:
    """Parse a file and publish its events (and dead letters) to Kafka."""
    settings = get_settings()
    hints = {k: v for k, v in {"node": node, "time": at, "collective": collective}.items() if v}
    t0 = time.perf_counter()
    paths = input_files(file)
    result = parse_files(source, paths, cluster or default_cluster(source, settings.cluster), hints)
    info = summary(result)
    info["parse_seconds"] = round(time.perf_counter() - t0, 3)
    if not dry_run:
        info.update(publish(result, wait, timeout))
    info["dry_run"] = dry_run
    if format == "json":
        typer.echo(json.dumps(info, indent=2))
        return
    verb = "validated" if dry_run else "published"
    names = ", ".join(map(str, paths))
    console.print(f"{verb} {info['events']:,} events, {info['dead_letters']:,} dead letters from {names}")
    for reason, count in info["dead_letter_reasons"].items():
        console.print(f"  [yellow]dead letter[/] ×{count}: {reason}")
    for note in info["notes"]:
        console.print(f"  note: {note}")
    if at is None and any("--time" in reason for reason in info["dead_letter_reasons"]):
        modified = utc_text(from_epoch(paths[0].stat().st_mtime))
        console.print(
            f"  hint: {paths[0]} was last modified at {modified}; if that is when it was written, "
            f"ingest it again with --time {modified}"
        )
    if wait and not dry_run:
        console.print(f"reflected in the facts after {info['wait_seconds']:.1f}s")
        if info.get("quarantined_nodes"):
            console.print(
                f"[yellow]{info['quarantined_nodes']} node(s) in quarantine[/]: their attribution stopped "
                "on their input; `gpuledger status` names them and the reason"
            )


def publish(result: ParseResult, wait: bool, timeout: float) -> dict[str, Any]:
    from pipelines.producer import EventProducer

    settings = get_settings()
    t0 = time.perf_counter()
    with EventProducer(settings) as producer:
        producer.publish_result(result)
    out: dict[str, Any] = {"publish_seconds": round(time.perf_counter() - t0, 3)}
    if wait:
        from streams.progress import end_offsets, wait_until_reflected

        t1 = time.perf_counter()
        lag = wait_until_reflected(settings, end_offsets(settings), timeout)
        out["wait_seconds"] = round(time.perf_counter() - t1, 3)
        out["quarantined_nodes"] = lag.quarantined
    return out


def register(app: typer.Typer) -> None:
    app.command(help="Parse a file of one source (format auto-detected) and publish it to Kafka.")(ingest)
