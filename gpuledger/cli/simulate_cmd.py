"""``gpuledger simulate``: a synthetic cluster in the real source formats, with its ground truth."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gpuledger.cli.main_errors import UsageFailure
from pipelines.times import parse_iso


def simulate(
    out: Annotated[Path, typer.Option(help="output folder (created)")],
    nodes: Annotated[int, typer.Option(min=1, max=512, help="nodes of 8 GPUs")] = 16,
    hours: Annotated[float, typer.Option(min=0.25, max=24 * 62, help="simulated hours")] = 24.0,
    seed: Annotated[int, typer.Option(help="random seed: same seed, same files")] = 1,
    start: Annotated[str | None, typer.Option(help="window start, ISO 8601 (default 2026-11-02T00:00Z)")] = None,
    scrape_interval: Annotated[int, typer.Option(min=1, help="seconds between dcgm scrapes")] = 30,
) -> None:
    """Write dcgm, Kubernetes, Slurm, storage, nccl, org and pricing files plus truth.json."""
    from pipelines.simulator.simulate import simulate as run

    begin = None
    if start:
        try:
            begin = parse_iso(start)
        except ValueError:
            raise UsageFailure(f"--start {start!r} is not ISO 8601") from None
    try:
        result = run(nodes, hours, seed, out, begin, scrape_interval_s=scrape_interval)
    except ValueError as exc:
        raise UsageFailure(str(exc)) from None
    truth = result.truth
    typer.echo(
        f"wrote {len(result.manifest['files'])} files to {out} in {result.elapsed_s:.1f}s: "
        f"{truth['allocated_gpu_seconds'] / 3600:,.1f} of {truth['capacity_gpu_seconds'] / 3600:,.1f} GPU-hours "
        f"allocated, {len(truth['attempts'])} attempts; ground truth in {out / 'truth.json'}"
    )


def register(app: typer.Typer) -> None:
    app.command(help="Simulate a cluster: source files in their real formats plus exact ground truth.")(simulate)
