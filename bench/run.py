"""One benchmark run: every measurement on the same messages, in isolated topics and databases.

Phases, in order (``phases`` picks some): **stream** — publish 1 h of history → start a worker →
reflected (RSS after 1 h) → publish the other 23 h while the worker runs → reflected (pipeline
rate, RSS after 24 h) → bare aiokafka consume of the same gpu.metrics messages → paced load for
freshness → truncate + rewind + a new worker (replay rate from offset 0); **live** — one worker's
and the endpoint's CPU per GPU-sample live and in backlog (``bench.live``); **sources** — the
collectors' parse + publish rate per source (``bench.sources``); **query** — the monthly query
over generated facts. Topics are prefixed ``bench-<tag>.`` (``bench-live_<tag>.``,
``bench-src_<tag>.``) and databases named ``bench_<tag>`` / ``bench_q_<tag>`` /
``bench_live_<tag>``; they are removed at the end unless ``keep`` is set. Nothing the user owns is
read or written.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from kafka import KafkaAdminClient

from bench import fresh, live, profile, query, sources
from bench.load import GPUS_PER_NODE, Load, encode, gpu_messages_in, gpu_samples_in, publish
from bench.worker import Worker, bare_consume, reflect
from infra.errors import ServiceError
from infra.kafka.broker import broker_answers, ensure_topics
from infra.services import apply_migrations, endpoint_answers
from pipelines.parsers.dcgm_matrix import SCRAPE_ROWS
from pipelines.settings import Settings
from pipelines.topics import all_physical_topics
from sql.client import server_client
from streams import replay

Say = Callable[[str], None]


PHASES = ("stream", "live", "sources", "query")  # in the order they run


@dataclass(frozen=True)
class Sizes:
    nodes: int  # history nodes (8 GPUs each)
    interval_s: int  # scrape interval of the history
    fresh_nodes: int
    fresh_rate: float  # GPU-samples/s of the paced load
    fresh_seconds: float
    query_samples: int  # GPU-sample-equivalents of generated facts
    reflect_timeout_s: float
    live_nodes: int  # nodes scraped every live.INTERVAL_S, live and as a backlog
    live_seconds: float  # of each of the two parts
    sources: sources.Sizes  # collector inputs
    # the stream phase's history as the query_range collector sends it: a node's scrapes this
    # many to a message (``gpu.sample`` version 3; 1: one scrape a message, as a live collector)
    scrapes_per_message: int = SCRAPE_ROWS // GPUS_PER_NODE


SMOKE = Sizes(
    nodes=4,
    interval_s=300,
    fresh_nodes=16,
    fresh_rate=1000,
    fresh_seconds=8,
    query_samples=2_000_000,
    reflect_timeout_s=240,
    live_nodes=4,
    live_seconds=30,
    sources=sources.Sizes(nodes=4, points=30, scrapes=3, pods=40),
)
FULL = Sizes(
    nodes=32,
    interval_s=30,
    fresh_nodes=125,
    fresh_rate=10_000,
    fresh_seconds=30,
    query_samples=100_000_000,
    reflect_timeout_s=900,
    live_nodes=256,
    live_seconds=300,
    sources=sources.Sizes(nodes=32, points=180, scrapes=20, pods=1000),
)


def isolated(base: Settings, tag: str, home: Path) -> Settings:
    return base.model_copy(
        update={"topic_prefix": f"bench-{tag}.", "clickhouse_database": f"bench_{tag}", "home": home}
    )


def run(
    base: Settings,
    smoke: bool,
    say: Say,
    keep: bool = False,
    profile_out: Path | None = None,
    workers: int = 1,
    phases: tuple[str, ...] = PHASES,
    live_nodes: int | None = None,
    live_seconds: float | None = None,
    scrapes_per_message: int | None = None,
) -> dict[str, Any]:
    """The ``phases`` asked for, the stream phases with ``workers`` stream workers (one consumer
    group); ``profile_out``: py-spy's collapsed stacks of the first worker during the 23 h phase.
    ``live_nodes``/``live_seconds`` override the mode's live sizes, ``scrapes_per_message`` the
    stream phase's (``Sizes.scrapes_per_message``)."""
    if not broker_answers(base) or not endpoint_answers(base):
        raise ServiceError("Kafka or ClickHouse does not answer: run `gpuledger up --workers 0` first")
    unknown = set(phases) - set(PHASES)
    if unknown:
        raise ValueError(f"unknown bench phases {sorted(unknown)}: choose from {', '.join(PHASES)}")
    sizes = SMOKE if smoke else FULL
    sizes = replace(
        sizes,
        live_nodes=live_nodes or sizes.live_nodes,
        live_seconds=live_seconds or sizes.live_seconds,
        scrapes_per_message=scrapes_per_message or sizes.scrapes_per_message,
    )
    tag = uuid.uuid4().hex[:8]
    home = Path(tempfile.mkdtemp(prefix=f"gpuledger-bench-{tag}-"))
    settings = isolated(base, tag, home)
    qsettings = settings.model_copy(update={"clickhouse_database": f"bench_q_{tag}"})
    lsettings = isolated(base, f"live_{tag}", home)  # its own topics and database: the same tag last
    ssettings = isolated(base, f"src_{tag}", home)
    results: dict[str, Any] = {
        "mode": "smoke" if smoke else "full",
        "tag": tag,
        "workers": workers,
        "phases": [p for p in PHASES if p in phases],
        "scrapes_per_message": sizes.scrapes_per_message,
    }
    try:
        if "stream" in phases:
            results.update(nodes=sizes.nodes, gpus=sizes.nodes * GPUS_PER_NODE, scrape_interval_s=sizes.interval_s)
            ensure_topics(settings)
            apply_migrations(settings)
            results.update(_stream_phases(settings, sizes, home, say, profile_out, workers))
            if not keep:  # done with: its tables would cost the endpoint idle CPU in the live phase's figures
                cleanup(settings, [settings.clickhouse_database])
        if "live" in phases:
            results.update(_live_phase(lsettings, sizes, home, say))
        if "sources" in phases:
            say("collector parse + publish per source")
            ensure_topics(ssettings)
            results.update(sources.measure(ssettings, sizes.sources))
        if "query" in phases:
            results.update(_query_phase(qsettings, sizes, say))
    finally:
        if not keep:
            cleanup(settings, [settings.clickhouse_database, qsettings.clickhouse_database])
            cleanup(lsettings, [lsettings.clickhouse_database])
            cleanup(ssettings, [])
    return results


def _live_phase(settings: Settings, sizes: Sizes, home: Path, say: Say) -> dict[str, Any]:
    ensure_topics(settings)
    apply_migrations(settings)
    return live.measure(settings, sizes.live_nodes, sizes.live_seconds, home, say, sizes.reflect_timeout_s)


def _query_phase(settings: Settings, sizes: Sizes, say: Say) -> dict[str, Any]:
    say("generating facts for the monthly query")
    out = query.generate_facts(settings, sizes.query_samples)
    say("timing the monthly cost-by-team query")
    return out | query.time_monthly_query(settings)


def _start(settings: Settings, home: Path, count: int, first_index: int) -> list[Worker]:
    return [Worker(settings, home / f"worker-{i}.log", i) for i in range(first_index, first_index + count)]


def _stop(workers: list[Worker]) -> None:
    for w in workers:
        w.stop()


def _rss(workers: list[Worker]) -> float:
    """The largest worker's resident size (each worker is its own process)."""
    return round(max(w.rss_mib() for w in workers), 1)


def _stream_phases(
    settings: Settings, sizes: Sizes, home: Path, say: Say, profile_out: Path | None, count: int = 1
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    load = Load(sizes.nodes, sizes.interval_s, scrapes_per_message=sizes.scrapes_per_message)
    first, total = load.rounds_for(1), load.rounds_for(24)
    hour = encode(load, 0, first)
    rest = encode(load, first, total - first)
    say(f"publishing 1 h of history ({gpu_samples_in(hour)} GPU-samples) and starting {count} worker(s)")
    publish(settings, hour)
    workers = _start(settings, home, count, 0)
    try:
        began = time.perf_counter()
        reflect(settings, sizes.reflect_timeout_s)
        out["first_hour_with_startup_s"] = round(time.perf_counter() - began, 2)
        out["rss_1h_mib"] = _rss(workers)
        samples = gpu_samples_in(rest)
        say(f"publishing the other 23 h ({samples} GPU-samples) while the worker runs")
        sampler = profile.start(workers[0].proc.pid, profile_out) if profile_out else None
        began = time.perf_counter()
        publish_s = publish(settings, rest)
        reflect(settings, sizes.reflect_timeout_s)
        elapsed = time.perf_counter() - began
        if sampler is not None:
            profile.stop(sampler)
        out.update(
            pipeline_gpu_samples=samples,
            pipeline_s=round(elapsed, 2),
            pipeline_samples_per_s=round(samples / elapsed, 1),
            publish_samples_per_s=round(samples / publish_s, 1),
            rss_24h_mib=_rss(workers),
        )
        out["rss_growth_pct"] = round(100 * (out["rss_24h_mib"] / out["rss_1h_mib"] - 1), 1)
        say("bare aiokafka consume of the same gpu.metrics messages")
        bare_s = bare_consume(settings, gpu_messages_in(hour) + gpu_messages_in(rest))
        out["bare_consume_samples_per_s"] = round(total * sizes.nodes * GPUS_PER_NODE / bare_s, 1)
        out["pipeline_vs_bare_pct"] = round(100 * out["pipeline_samples_per_s"] / out["bare_consume_samples_per_s"], 3)
        say(f"paced load at {sizes.fresh_rate:.0f} GPU-samples/s for {sizes.fresh_seconds:.0f} s")
        paced = Load(sizes.fresh_nodes, 30, start=load.start + timedelta(days=40), node_prefix="fresh")
        out.update(fresh.measure(settings, paced, sizes.fresh_rate, sizes.fresh_seconds))
        reflect(settings, sizes.reflect_timeout_s)
    finally:
        _stop(workers)
    say(f"replay: truncate, rewind, time {count} new worker(s) from offset 0")
    replay.truncate(settings)
    replay.rewind(settings)
    all_samples = (total * sizes.nodes + out["freshness_rounds"] * sizes.fresh_nodes) * GPUS_PER_NODE
    workers = _start(settings, home, count, count)
    try:
        began = time.perf_counter()
        reflect(settings, sizes.reflect_timeout_s)
        elapsed = time.perf_counter() - began
    finally:
        _stop(workers)
    out.update(
        replay_gpu_samples=all_samples, replay_s=round(elapsed, 2), replay_samples_per_s=round(all_samples / elapsed, 1)
    )
    return out


def cleanup(settings: Settings, databases: list[str]) -> None:
    """Drop the benchmark's own databases and topics (their names carry the run's tag)."""
    with contextlib.suppress(Exception):
        admin_ch = server_client(settings)
        try:
            for db in databases:
                if db.startswith("bench_"):
                    # SYNC: the tables' data is removed now, not by the engine minutes later
                    # (``database_atomic_delay_before_drop_table_sec``, 8 min) while a later phase
                    # measures the endpoint's CPU
                    admin_ch.command(f"DROP DATABASE IF EXISTS `{db}` SYNC")
        finally:
            admin_ch.close()
    with contextlib.suppress(Exception):
        admin = KafkaAdminClient(**settings.kafka_client_config())
        try:
            names = [n for n, _, _ in all_physical_topics(settings) if n.startswith("bench-")]
            present = set(admin.list_topics())
            admin.delete_topics([n for n in names if n in present])
        finally:
            admin.close()
