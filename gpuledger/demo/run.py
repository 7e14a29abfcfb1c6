"""The steps of ``gpuledger demo``: services, simulator, Kafka, stream workers, Dagster, outputs.

Every step takes a ``Step`` callback (``step(total)`` returns an ``advance(n)`` function) so the CLI
can draw progress bars; the library itself prints nothing.

Idempotence: the simulated cluster is named after its parameters (``demo-16n24h-s1``). Event ids
are deterministic and the facts idempotent, so running the same demo again reproduces the same
numbers; a demo with other parameters writes another cluster and never mixes with this one (the
FOCUS files list every cluster of the month, one BillingAccount each).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pipelines.settings import Settings

Advance = Callable[[float], None]
Step = Callable[[str, float | None], Advance]
DEFAULT_START = datetime(2026, 11, 2, tzinfo=UTC)
# Dagster's run log stays out of the progress bars; failed checks and runs are reported by the demo
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
DCGM_NOTE = (
    "dcgm history from the simulator's Prometheus query_range file (the live path — exporter, "
    "Prometheus, `gpuledger collect dcgm --prometheus` — is exercised by the collector's tests)"
)


@dataclass
class DemoConfig:
    nodes: int = 16
    hours: float = 24.0
    seed: int = 1
    out: Path = Path("out")
    workers: int = 1
    start: datetime = DEFAULT_START
    timeout_s: float = 1800.0

    @property
    def cluster(self) -> str:
        return f"demo-{self.nodes}n{self.hours:g}h-s{self.seed}".replace(".", "_")

    @property
    def end(self) -> datetime:
        return self.start + timedelta(hours=self.hours)


@dataclass
class DemoResult:
    config: DemoConfig
    data: dict[str, Any]
    files: list[Path] = field(default_factory=list)
    events: int = 0
    dead_letters: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    blocking_failures: list[str] = field(default_factory=list)


def days(cfg: DemoConfig) -> list[str]:
    first, last = cfg.start.date(), (cfg.end - timedelta(milliseconds=1)).date()
    return [(first + timedelta(days=i)).isoformat() for i in range((last - first).days + 1)]


def months(cfg: DemoConfig) -> list[str]:
    return sorted({d[:7] for d in days(cfg)})


def start_services(settings: Settings, cfg: DemoConfig, step: Step) -> list[str]:
    from infra.services import up

    step("starting services (Kafka, ClickHouse, stream workers)", None)
    report = up(settings, workers=cfg.workers)
    return [*report.started, *report.running, *report.external]


def simulate(cfg: DemoConfig, sim_dir: Path, step: Step) -> dict[str, Any]:
    from pipelines.simulator.simulate import simulate as run

    step(f"simulating {cfg.nodes} nodes × {cfg.hours:g} h (seed {cfg.seed})", None)
    result = run(cfg.nodes, cfg.hours, cfg.seed, sim_dir, cfg.start, cluster=cfg.cluster)
    return result.manifest


def publish(
    settings: Settings, cfg: DemoConfig, sim_dir: Path, manifest: dict[str, Any], step: Step
) -> tuple[int, int]:
    """Parse every simulator file with the ingest parsers and publish it through the producer."""
    from pipelines.parsers.registry import parse_manifest_entry
    from pipelines.producer import EventProducer

    files = manifest["files"]
    advance = step("parsing and publishing to Kafka", len(files))
    events = letters = 0
    with EventProducer(settings) as producer:
        for entry in files:
            result = parse_manifest_entry(sim_dir, entry, cfg.cluster)
            producer.publish_result(result)
            events, letters = events + len(result.events), letters + len(result.dead_letters)
            advance(1)
    return events, letters


def wait(settings: Settings, cfg: DemoConfig, step: Step) -> None:
    """Until the workers have consumed everything and every node's windows are attributed."""
    from streams.progress import NotCaughtUp, current_lag, end_offsets

    targets = end_offsets(settings)
    lag = current_lag(settings, targets)
    total = max(lag.messages, 1)
    advance = step("stream workers attributing GPU-seconds", total)
    done, deadline = 0, time.monotonic() + cfg.timeout_s
    while lag.messages or lag.nodes_pending:
        if time.monotonic() > deadline:
            raise NotCaughtUp(
                f"after {cfg.timeout_s:.0f}s {lag.messages} messages are unconsumed and "
                f"{lag.nodes_pending} nodes not yet attributed: is a stream worker running?"
            )
        time.sleep(1.0)
        lag = current_lag(settings, targets, known=lag)
        now_done = total - min(lag.messages, total)
        advance(now_done - done)
        done = now_done
    advance(total - done)


def materialize(settings: Settings, cfg: DemoConfig, step: Step) -> list[str]:
    """The daily assets (with their checks) for each simulated day, then the monthly ones."""
    import dagster as dg

    from dagster_project.definitions import defs
    from dagster_project.defs.common.resources import (
        CapacityResource,
        ClickHouseResource,
        ExportResource,
        OrgResource,
        PricingResource,
    )

    resources = {
        "clickhouse": ClickHouseResource.from_settings(settings),
        "pricing": PricingResource(),
        "org": OrgResource(),
        "exports": ExportResource(),
        "capacity": CapacityResource(),
    }
    assets = [a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition)]
    checks = [c for c in defs.asset_checks or [] if isinstance(c, dg.AssetChecksDefinition)]
    daily = [a for a in assets if isinstance(a.partitions_def, dg.DailyPartitionsDefinition)]
    monthly = [a for a in assets if isinstance(a.partitions_def, dg.MonthlyPartitionsDefinition)]
    runs = [(daily, d) for d in days(cfg)] + [(monthly, f"{m}-01") for m in months(cfg)]
    advance = step("materializing Dagster assets", len(runs))
    failed: list[str] = []
    for group, key in runs:
        keys = {k for a in group for k in a.keys}
        mine = [c for c in checks if any(spec.asset_key in keys for spec in c.check_specs)]
        result = dg.materialize(
            [*group, *mine], partition_key=key, resources=resources, raise_on_error=False, run_config=QUIET
        )
        failed += [
            f"{key}: {e.check_name} ({e.severity.value.lower()})"
            for e in result.get_asset_check_evaluations()
            if not e.passed
        ]
        if not result.success:
            failed.append(f"{key}: the run failed; the assets after the failed blocking check were not materialized")
        advance(1)
    return failed


def write_outputs(settings: Settings, cfg: DemoConfig, step: Step, note: str) -> tuple[dict[str, Any], list[Path]]:
    """Dashboard, SRE report and the FOCUS chargeback files (all rows and one per business unit)."""
    from dagster_project.defs.exports.on_demand import export_chargeback
    from gpuledger.dashboard import html, sre
    from gpuledger.dashboard.data import collect
    from sql.client import get_client

    step("writing the dashboard, SRE report and chargeback files", None)
    cfg.out.mkdir(parents=True, exist_ok=True)
    client = get_client(settings)
    try:
        data = collect(client, cfg.cluster, cfg.start, cfg.end)
        files: list[Path] = []
        for month in months(cfg):
            for fmt in ("csv", "parquet"):
                files += export_chargeback(client, month, cfg.out, fmt, None, cfg.cluster).paths
    finally:
        client.close()
    dashboard, report = cfg.out / "dashboard.html", cfg.out / "sre-failures.md"
    dashboard.write_text(html.render(data, note), encoding="utf-8")
    report.write_text(sre.render(data), encoding="utf-8")
    (cfg.out / "demo.json").write_text(
        json.dumps(
            {
                "cluster": cfg.cluster,
                "nodes": cfg.nodes,
                "hours": cfg.hours,
                "seed": cfg.seed,
                "start": data["start"],
                "end": data["end"],
                "totals": data["totals"],
            },
            indent=2,
        ),
        encoding="utf-8",
    )
    return data, [dashboard, report, *files]


def run_demo(settings: Settings, cfg: DemoConfig, step: Step) -> DemoResult:
    timings: dict[str, float] = {}

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        value = fn()
        timings[name] = round(time.perf_counter() - t0, 1)
        return value

    sim_dir = settings.home / "demo" / cfg.cluster
    timed("services", lambda: start_services(settings, cfg, step))
    manifest = timed("simulate", lambda: simulate(cfg, sim_dir, step))
    events, letters = timed("publish", lambda: publish(settings, cfg, sim_dir, manifest, step))
    timed("attribute", lambda: wait(settings, cfg, step))
    failed = timed("dagster", lambda: materialize(settings, cfg, step))
    note = DCGM_NOTE + "".join(f". Asset check not passed: {f}" for f in failed)
    data, files = timed("outputs", lambda: write_outputs(settings, cfg, step, note))
    notes = [DCGM_NOTE] + [f"[red]asset check not passed:[/] {f}" for f in failed]
    return DemoResult(cfg, data, files, events, letters, timings, notes, [f for f in failed if "(warn)" not in f])
