"""Live against backlog: CPU per GPU-sample of one stream worker and of the ClickHouse endpoint.

The same nodes (``nodes`` × 8 GPUs, scraped every ``interval_s``, a pod on every node every
``ALLOC_PERIOD_S`` published as the Kubernetes collector follows it: started, then ended) are worked
in two ways by one worker, on one history:

1. **warm-up** — the worker is started and one scrape of every node is published and reflected
   (the worker's start-up is in neither figure); then both processes are watched for ``IDLE_S``
   with no new data (``idle_figures``: what being up costs, and that cost per GPU-sample at the
   live rate — the part of the live figures that does not depend on the data). The endpoint's idle
   CPU grows with the tables it serves: ``live_endpoint_databases`` names the databases it held;
2. **backlog** — ``R = seconds / interval_s`` scrapes ending just before now are published at once
   and drained (wait until reflected);
3. **live** — the next ``R`` scrapes are published in real time, one every ``interval_s``, each
   stamped with the wall time it is sent (as a collector does; the gap the drain took is a gap in
   the scrapes), then reflected.

The backlog comes first because both parts are the same nodes' one history: scrapes published
after the live ones but stamped earlier would be late data, stamped later future data. CPU time
(``bench.cpu``) of the worker and of the endpoint is read before and after each part; each
figure is that CPU ÷ the part's GPU-samples. The bench's own progress polls (three small queries
per second while waiting) are in the endpoint's figures of both parts. Both parts end with scrapes
in the current window, which is written once it has ended on the wall clock: each part's figures
include that wait (at most one window) and the window's single write; the bench sleeps through
the wait (``_until_window_end``) instead of polling, so its polls weigh the same in both parts.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from bench import cpu
from bench.load import GPUS_PER_NODE, Load, encode, gpu_samples_in, publish, publish_paced
from bench.worker import Worker, reflect
from pipelines.settings import Settings
from pipelines.times import floor_seconds, from_epoch
from sql.client import server_client
from streams.attribution.state import IDLE_FLUSH_S

PREFIX = "live"
ALLOC_PERIOD_S = 150  # a pod starts on every node every 150 s and runs 112 s: two per node and part by default
POLL_S = 1.0
INTERVAL_S = 10  # the scrape interval of both parts
IDLE_S = 20.0  # after the warm-up: how long both processes are watched with no new data


def measure(
    settings: Settings,
    nodes: int,
    seconds: float,
    home: Path,
    say: Callable[[str], None],
    timeout_s: float,
    interval_s: int = INTERVAL_S,
) -> dict[str, Any]:
    """Warm-up, backlog, live (see the module docstring); the results' ``live_*``/``backlog_*`` fields."""
    rounds = max(int(seconds // interval_s), 1)
    endpoint = cpu.endpoint_pid(settings.clickhouse_endpoint_url)
    if endpoint is None:
        say(f"no local process serves {settings.clickhouse_endpoint_url}: the endpoint's CPU is not measured")
    worker = Worker(settings, home / "live-worker.log")
    try:
        warm = Load(nodes, interval_s, start=_before((rounds + 2) * interval_s), node_prefix=PREFIX)  # no pod
        say(f"live: starting a worker, warm-up scrape of {nodes} nodes")
        publish(settings, encode(warm, 0, 1))
        reflect(settings, timeout_s, POLL_S)
        idle_s = min(IDLE_S, seconds / 3)
        databases = user_databases(settings)
        say(f"live: {idle_s:.0f} s with no new data (what being up costs); the endpoint holds {', '.join(databases)}")
        quiet = cpu.read(worker.proc.pid, endpoint)
        time.sleep(idle_s)
        idle = idle_figures(quiet, cpu.read(worker.proc.pid, endpoint), idle_s, nodes * GPUS_PER_NODE / interval_s)
        # scrapes 0 … rounds-1 are the backlog, ending just before now; rounds … 2·rounds-1 are live
        load = Load(
            nodes,
            interval_s,
            start=_before(rounds * interval_s),
            node_prefix=PREFIX,
            alloc_period_s=ALLOC_PERIOD_S,
            announce_start=True,
        )
        backlog = encode(load, 0, rounds)
        samples = gpu_samples_in(backlog)
        say(f"live: backlog of {rounds} scrapes ({samples} GPU-samples) published at once and drained")
        before = cpu.read(worker.proc.pid, endpoint)
        began = time.perf_counter()
        publish(settings, backlog)
        _until_window_end(settings)
        reflect(settings, timeout_s, POLL_S)
        backlog_s = time.perf_counter() - began
        middle = cpu.read(worker.proc.pid, endpoint)
        say(f"live: {rounds} scrapes of {nodes} nodes in real time, one every {interval_s} s")
        load = replace(load, start=_before(rounds * interval_s))  # the live scrapes stamped as they are sent
        rate = load.samples_per_round / interval_s
        acked = publish_paced(settings, load, rate, rounds * interval_s, first_round=rounds)
        _until_window_end(settings)
        reflect(settings, timeout_s, POLL_S)
        after = cpu.read(worker.proc.pid, endpoint)
    finally:
        worker.stop()
    live_samples = len(acked) * load.samples_per_round
    return (
        figures(before, middle, after, samples, live_samples)
        | idle
        | {
            "live_nodes": nodes,
            "live_interval_s": interval_s,
            "live_rounds": len(acked),
            "live_gpu_samples": live_samples,
            "backlog_gpu_samples": samples,
            "backlog_drain_s": round(backlog_s, 2),
            "live_endpoint_databases": databases,
        }
    )


def figures(
    before: cpu.Reading, middle: cpu.Reading, after: cpu.Reading, backlog_samples: int, live_samples: int
) -> dict[str, float | None]:
    """CPU-µs per GPU-sample of both parts (backlog: before → middle, live: middle → after) and
    live ÷ backlog; the endpoint's only when it was measured."""
    backlog = cpu.per_sample_us(middle.worker_s - before.worker_s, backlog_samples)
    live = cpu.per_sample_us(after.worker_s - middle.worker_s, live_samples)
    out = {
        "backlog_cpu_us_per_sample": backlog,
        "live_cpu_us_per_sample": live,
        "live_vs_backlog_cpu": _ratio(live, backlog),
    }
    if before.endpoint_s is not None and middle.endpoint_s is not None and after.endpoint_s is not None:
        backlog = cpu.per_sample_us(middle.endpoint_s - before.endpoint_s, backlog_samples)
        live = cpu.per_sample_us(after.endpoint_s - middle.endpoint_s, live_samples)
        out.update(
            backlog_endpoint_cpu_us_per_sample=backlog,
            live_endpoint_cpu_us_per_sample=live,
            live_vs_backlog_endpoint_cpu=_ratio(live, backlog),
        )
    return out


def idle_figures(start: cpu.Reading, end: cpu.Reading, seconds: float, live_rate: float) -> dict[str, float]:
    """What being up costs with no new data: each process's share of a core over ``seconds``, and
    that cost per GPU-sample at the live part's rate (``live_rate`` GPU-samples/s), i.e. the part of
    the live figure that does not depend on the data."""
    out: dict[str, float] = {}
    for name, key, a, b in (
        ("worker", "live_idle_cpu_us_per_sample", start.worker_s, end.worker_s),
        ("endpoint", "live_idle_endpoint_cpu_us_per_sample", start.endpoint_s, end.endpoint_s),
    ):
        if a is None or b is None:
            continue
        rate = (b - a) / seconds  # CPU seconds per second
        out[f"idle_{name}_cpu_pct"] = round(rate * 100, 1)
        out[key] = round(rate * 1e6 / live_rate, 1)
    return out


def user_databases(settings: Settings) -> list[str]:
    """The databases the ClickHouse endpoint holds besides its own (system, information schema, default)."""
    client = server_client(settings)
    try:
        rows = client.query(
            "SELECT name FROM system.databases WHERE name NOT IN "
            "('system', 'information_schema', 'INFORMATION_SCHEMA', 'default') ORDER BY name"
        ).result_rows
    finally:
        client.close()
    return [str(r[0]) for r in rows]


def _ratio(a: float, b: float) -> float | None:
    """a ÷ b to two decimals; None when b is 0 (no CPU tick was counted: the ratio is unknown)."""
    return round(a / b, 2) if b > 0 else None


def _until_window_end(settings: Settings) -> None:
    """Sleep until the current window has ended and the step after it can have run: no window with
    the scrapes just published is written before (``streams.attribution.step``)."""
    w = settings.window_seconds
    time.sleep(max(floor_seconds(time.time(), w) + w + IDLE_FLUSH_S + 1.0 - time.time(), 0.0))


def _before(seconds: float) -> datetime:
    """``seconds`` before now, to the whole second."""
    return from_epoch(math.floor(time.time()) - seconds)
