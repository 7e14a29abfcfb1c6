"""``gpuledger demo``: simulate a cluster, run it through Kafka, the stream workers and Dagster, and
show what finance and SRE see — a Rich summary, the FOCUS chargeback files, ``dashboard.html`` and
``sre-failures.md`` in ``--out``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from gpuledger.demo.run import Advance, DemoConfig, DemoResult, run_demo
from pipelines.settings import get_settings

console = Console()


class DemoIncomplete(RuntimeError):
    """The pipeline ran but a blocking Dagster check failed: outputs are written, costs incomplete."""


def demo(
    nodes: Annotated[int, typer.Option(min=1, max=128, help="simulated nodes of 8 GPUs")] = 16,
    hours: Annotated[
        float, typer.Option(min=1.0, max=24 * 31, help="simulated hours from 2026-11-02 00:00 UTC")
    ] = 24.0,
    seed: Annotated[int, typer.Option(help="random seed: same seed, same cluster, same numbers")] = 1,
    out: Annotated[Path, typer.Option("--out", help="folder for the dashboard, reports and FOCUS files")] = Path("out"),
    workers: Annotated[int, typer.Option(min=1, max=4, help="stream workers to run")] = 1,
) -> None:
    """Run the whole pipeline on a simulated cluster and write the finance and SRE views."""
    cfg = DemoConfig(nodes=nodes, hours=hours, seed=seed, out=out, workers=workers)
    with _progress() as progress:
        result = run_demo(get_settings(), cfg, _stepper(progress))
        for task in progress.tasks:
            progress.update(task.id, total=task.total or 1, completed=task.total or 1)
    summary(result)
    if result.blocking_failures:
        raise DemoIncomplete(
            f"{len(result.blocking_failures)} Dagster check(s) or run(s) failed, so some costs are "
            f"missing from the outputs: {'; '.join(result.blocking_failures)}"
        )


def _progress() -> Progress:
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )


def _stepper(progress: Progress) -> Any:
    previous: list[TaskID] = []

    def step(description: str, total: float | None) -> Advance:
        for task_id in previous:  # the previous step is done when the next one starts
            task = progress.tasks[task_id]
            progress.update(task_id, total=task.total or 1, completed=task.total or 1)
        task_id = progress.add_task(description, total=total)
        previous.append(task_id)
        return lambda n: progress.advance(task_id, n)

    return step


def _hours_table(title: str, rows: list[dict[str, Any]]) -> Table:
    table = Table(title=title)
    for col in ("group", "allocated", "busy", "idle", "failed"):
        table.add_column(col, justify="left" if col == "group" else "right")
    for r in rows:
        table.add_row(
            str(r["key"]), *(f"{float(r[f'{k}_gpu_hours']):,.1f}" for k in ("allocated", "busy", "idle", "failed"))
        )
    return table


def summary(result: DemoResult) -> None:
    data, cfg, t = result.data, result.config, result.data["totals"]
    console.rule(f"cluster {cfg.cluster}: {data['start']} – {data['end']}")
    console.print(
        f"published {result.events:,} events and {result.dead_letters:,} dead letters · "
        f"capacity {t['capacity_gpu_hours']:,.1f} GPU-h · allocated {t['allocated_gpu_hours']:,.1f} "
        f"(busy {t['busy_gpu_hours']:,.1f}, idle {t['idle_gpu_hours']:,.1f}) · unallocated "
        f"{t['unallocated_gpu_hours']:,.1f} · unavailable {t['unavailable_gpu_hours']:,.1f}"
    )
    owned = [r for r in data["gpu_hours_by_business_unit"] if not str(r["key"]).startswith("__")]
    console.print(_hours_table("GPU-hours by business unit", owned))
    cost = Table(title="cost by business unit")
    cost.add_column("business unit")
    cost.add_column("cost", justify="right")
    by_bu: dict[str, float] = {}
    for r in data["daily_cost_by_business_unit"]:
        by_bu[r["business_unit"]] = by_bu.get(r["business_unit"], 0.0) + float(r["cost"])
    for bu, value in sorted(by_bu.items(), key=lambda kv: -kv[1]):
        cost.add_row(bu, f"{value:,.2f}")
    cost.add_row("[b]total[/]", f"[b]{t['cost']:,.2f}[/]")
    console.print(cost)
    team = [r for r in data["gpu_hours_by_team"] if not str(r["key"]).startswith("__")]
    console.print(_hours_table("GPU-hours by team", team[:12]))
    _failures_and_queue(data)
    _unit_cost(data)
    for note in result.notes:
        console.print(f"[dim]note:[/] {note}")
    console.print("timings (s): " + ", ".join(f"{k} {v}" for k, v in result.timings.items()))
    for path in result.files:
        console.print(f"wrote {path}")


def _failures_and_queue(data: dict[str, Any]) -> None:
    fail = Table(title="top failure burns")
    for col in ("reason", "team", "job", "attempt", "failed GPU-h", "lost GPU-h"):
        fail.add_column(col)
    for r in data["failures"][:8]:
        fail.add_row(
            r["failure_reason"],
            r["team"],
            r["job"],
            str(r["attempt"]),
            f"{r['failed_gpu_hours']:,.2f}",
            f"{float(r['lost_gpu_hours'] or 0):,.2f}",
        )
    console.print(fail)
    queue = Table(title="queue time")
    for col in ("scheduler", "queue", "attempts", "avg wait (min)", "p95 wait (min)", "waited GPU-h"):
        queue.add_column(col)
    for r in data["queue"]:
        queue.add_row(
            r["scheduler"],
            r["queue"],
            str(r["attempts"]),
            f"{r['avg_wait_s'] / 60:,.1f}",
            f"{r['p95_wait_s'] / 60:,.1f}",
            f"{r['waited_gpu_hours']:,.2f}",
        )
    console.print(queue)


def _unit_cost(data: dict[str, Any]) -> None:
    from rich.markup import escape

    from dagster_project.defs.exports.on_demand import scaled_text

    terms = ("compute", "network", "storage", "support", "operations", "idle", "retries")
    for r in data["unit_cost"]:
        parts = " + ".join(f"{t} {float(r[t]):,.2f}" for t in terms)
        console.print(
            f"[b]effective unit cost[/] {str(r['month'])[:7]}: ({parts}) / {r['accepted_units']:g} "
            f"{r['unit_kind']} = [b]{escape(scaled_text(r))}[/]"
        )


def register(app: typer.Typer) -> None:
    app.command(
        help="Simulate a cluster, run it through the whole pipeline and write the finance dashboard, "
        "SRE report and FOCUS chargeback files."
    )(demo)


if __name__ == "__main__":  # `python -m gpuledger.cli.demo_cmd` runs the demo alone
    import sys

    standalone = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    standalone.command()(demo)
    try:
        standalone()
    except DemoIncomplete as exc:
        sys.stderr.write(f"error: {exc}\n")
        raise SystemExit(1) from None
