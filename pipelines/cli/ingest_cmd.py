"""``gpuledger ingest SOURCE --file PATH``: parse a file in that source's format and publish it.

The format is detected from the content (e.g. exposition text vs ``query_range`` JSON, pod list vs
watch events, sacct vs squeue). Bad records go to dead letters and the command still exits 0; a
file that is not that source's format at all exits 2 with a one-line reason.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from pipelines.parsers import checkpoint, dcgm, kubernetes, nccl, outputs, reference, slurm, storage
from pipelines.parsers.base import NotThisFormat, ParseResult
from pipelines.settings import get_settings

console = Console(stderr=True)


class Source(StrEnum):
    dcgm = "dcgm"
    slurm = "slurm"
    kubernetes = "kubernetes"
    storage = "storage"
    checkpoint = "checkpoint"
    outputs = "outputs"
    nccl = "nccl"
    org = "org"
    pricing = "pricing"


PARSERS: dict[Source, Callable[..., ParseResult]] = {
    Source.dcgm: dcgm.parse,
    Source.slurm: slurm.parse,
    Source.kubernetes: kubernetes.parse,
    Source.storage: storage.parse,
    Source.checkpoint: checkpoint.parse,
    Source.outputs: outputs.parse,
    Source.nccl: nccl.parse,
    Source.org: reference.parse_org,
    Source.pricing: reference.parse_pricing,
}


def parse_file(source: Source, path: Path, cluster: str, hints: dict[str, Any] | None = None) -> ParseResult:
    if not path.is_file():
        raise NotThisFormat(f"{path}: no such file")
    data = path.read_bytes()
    try:
        return PARSERS[source](data, cluster=cluster, origin=str(path), **(hints or {}))
    except NotThisFormat as exc:
        raise NotThisFormat(f"{path} is not {source.value} input: {exc}") from None


def input_files(given: list[Path]) -> list[Path]:
    """The files named; a directory stands for the files in it (sorted, hidden ones skipped)."""
    paths: list[Path] = []
    for path in given:
        if not path.is_dir():
            paths.append(path)
            continue
        inside = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        if not inside:
            raise NotThisFormat(f"{path}: no file in this directory")
        paths += inside
    return paths


def parse_files(source: Source, paths: list[Path], cluster: str, hints: dict[str, Any] | None = None) -> ParseResult:
    """Several files as one input: Kubernetes pods with their ResourceClaims and ResourceSlices are
    read together (:func:`pipelines.parsers.kubernetes.parse_files`); other sources file by file."""
    if len(paths) == 1 or source is not Source.kubernetes:
        result = ParseResult()
        for path in paths:
            result.extend(parse_file(source, path, cluster, hints))
        return result
    for path in paths:
        if not path.is_file():
            raise NotThisFormat(f"{path}: no such file")
    try:
        return kubernetes.parse_files([(p.read_bytes(), str(p)) for p in paths], cluster=cluster, **(hints or {}))
    except NotThisFormat as exc:
        raise NotThisFormat(f"not {source.value} input: {exc}") from None


def parse_manifest_entry(base: Path, entry: dict[str, Any], cluster: str) -> ParseResult:
    """One file of a simulator manifest, with the files it is read together with (``with``: a pods
    file's ResourceClaims and ResourceSlices) and its parser hints."""
    paths = [base / entry["path"], *(base / p for p in entry.get("with", ()))]
    return parse_files(Source(entry["source"]), paths, cluster, entry.get("hints"))


def summary(result: ParseResult) -> dict[str, Any]:
    by_type: dict[str, int] = {}
    for e in result.events:
        by_type[e.type] = by_type.get(e.type, 0) + 1
    reasons: dict[str, int] = {}
    for d in result.dead_letters:
        reasons[d.reason] = reasons.get(d.reason, 0) + 1
    return {
        "events": len(result.events),
        "dead_letters": len(result.dead_letters),
        "by_type": by_type,
        "dead_letter_reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])[:10]),
        "notes": list(result.notes),
    }


def _default_cluster(source: Source, configured: str) -> str:
    """An org file ingested without ``--cluster`` applies to every cluster that has no version of
    its own in force (docs/ATTRIBUTION.md "Owner"); everything else belongs to the configured cluster."""
    return reference.ALL_CLUSTERS if source is Source.org else configured


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
    result = parse_files(source, paths, cluster or _default_cluster(source, settings.cluster), hints)
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
        modified = datetime.fromtimestamp(paths[0].stat().st_mtime, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
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
