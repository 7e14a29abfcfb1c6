"""`gpuledger up | down | status`: the local services and what they hold.

``up`` starts, in order, what is not configured as external: the Kafka broker (then creates the
registry's topics), the ClickHouse endpoint (then applies the DDL migrations), and the background
stream workers. Each step is idempotent, so ``up`` twice is harmless. ``down`` stops exactly what
``up`` started, by pid file, in reverse order.
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clickhouse_connect.driver.client import Client

from infra.errors import ServiceError
from infra.kafka import broker
from infra.process import Service, differences, read_pid, start, stop
from pipelines.settings import Settings
from pipelines.times import EPOCH
from sql import load_query
from sql.client import get_client
from sql.migrate import MigrationReport, apply
from streams import rollup

REPO_ROOT = Path(__file__).resolve().parent.parent
ROLLUP_MIGRATION = "0007_usage_hourly.sql"
ORG_SCOPE_MIGRATION = "0014_resolved_views_v2.sql"

Say = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


def endpoint_service(settings: Settings) -> Service:
    argv = [
        sys.executable,
        "-m",
        "infra.clickhouse.endpoint",
        "--data",
        str((settings.home / "chdb").resolve()),
        "--host",
        settings.clickhouse_host,
        "--port",
        str(settings.clickhouse_port),
    ]
    return Service(
        name="clickhouse",
        argv=argv,
        run_dir=settings.run_dir.resolve(),
        log_dir=settings.log_dir.resolve(),
        ready=lambda: endpoint_answers(settings),
        cwd=REPO_ROOT,
        start_timeout_s=60.0,
    )


def worker_service(settings: Settings, index: int) -> Service:
    """A stream worker with exactly these settings (``Settings.process_env``), not the ambient ones."""
    argv = [sys.executable, "-m", "streams", "worker", "--index", str(index)]
    env = settings.process_env()
    return Service(
        name=f"worker-{index}",
        argv=argv,
        run_dir=settings.run_dir.resolve(),
        log_dir=settings.log_dir.resolve(),
        ready=lambda: True,
        env=env,
        cwd=REPO_ROOT,
        start_timeout_s=5.0,
        identity={k: v for k, v in env.items() if "PASSWORD" not in k},
    )


def endpoint_answers(settings: Settings, timeout_s: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(settings.clickhouse_endpoint_url.rstrip("/") + "/ping", timeout=timeout_s) as r:  # noqa: S310
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


@dataclass
class UpReport:
    started: list[str] = field(default_factory=list)
    running: list[str] = field(default_factory=list)
    external: list[str] = field(default_factory=list)
    topics_created: list[str] = field(default_factory=list)
    migrations: MigrationReport | None = None
    stopped: list[str] = field(default_factory=list)
    # running services started with other settings than this ``up``: name → differences
    mismatched: dict[str, list[str]] = field(default_factory=dict)


def up(settings: Settings, say: Say = _quiet, workers: int | None = None, stop_extra: bool = False) -> UpReport:
    """Start what is not running (broker, endpoint, ``workers`` stream workers), create topics and
    apply migrations. Running services started with other settings are reported in ``mismatched``;
    with ``stop_extra``, running workers beyond ``workers`` are stopped."""
    report = UpReport()
    if settings.external_kafka:
        report.external.append(f"kafka {settings.bootstrap_servers}")
        if not broker.broker_answers(settings, timeout_s=5.0):
            raise ServiceError(f"Kafka at {settings.bootstrap_servers} does not answer")
    else:
        say("starting Kafka broker")
        _start(broker.broker_service(settings), report)
    say("creating topics")
    report.topics_created = broker.ensure_topics(settings)
    if settings.external_clickhouse:
        report.external.append(f"clickhouse {settings.clickhouse_endpoint_url}")
        if not endpoint_answers(settings, timeout_s=5.0):
            raise ServiceError(f"ClickHouse at {settings.clickhouse_endpoint_url} does not answer on /ping")
    else:
        say("starting ClickHouse endpoint")
        _start(endpoint_service(settings), report)
    say("applying migrations")
    report.migrations = apply_migrations(settings)
    count = settings.stream_workers if workers is None else workers
    if count and _streams_available():
        for index in range(count):
            say(f"starting stream worker {index}")
            _start(worker_service(settings, index), report)
    for service in _local_services(settings) if stop_extra else []:  # fewer workers than run: stop the rest
        if service.name.startswith("worker-") and int(service.name.removeprefix("worker-")) >= count:
            say(f"stopping {service.name}")
            if stop(service):
                report.stopped.append(service.name)
    return report


def _start(service: Service, report: UpReport) -> None:
    differ = differences(service)
    if differ:
        report.mismatched[service.name] = differ
    _, now = start(service)
    (report.started if now else report.running).append(service.name)


def _streams_available() -> bool:
    return (REPO_ROOT / "streams" / "__main__.py").exists()


def apply_migrations(settings: Settings) -> MigrationReport:
    """``sql.migrate.apply``, then the rollup's backfills an upgrade needs (``streams.rollup``)."""
    return apply(settings, after=_backfill_rollup)


def _backfill_rollup(client: Client, report: MigrationReport) -> None:
    if ROLLUP_MIGRATION in report.applied:  # facts written before the rollup existed: build their hours
        rollup.rebuild_stale(client, EPOCH)
    elif ORG_SCOPE_MIGRATION in report.applied:  # hours built before org versions were per cluster
        rollup.rebuild_since(client, "", EPOCH)


def down(settings: Settings, say: Say = _quiet) -> list[str]:
    stopped: list[str] = []
    for service in _local_services(settings)[::-1]:
        if stop(service):
            say(f"stopped {service.name}")
            stopped.append(service.name)
    return stopped


def _local_services(settings: Settings) -> list[Service]:
    """Pid-file handles of the services this home may run (no side effects, no downloads)."""
    services = []
    if not settings.external_kafka:
        services.append(Service("kafka", [], settings.run_dir.resolve(), settings.log_dir.resolve(), lambda: True))
    if not settings.external_clickhouse:
        services.append(endpoint_service(settings))
    for pid_file in sorted(settings.run_dir.glob("worker-*.pid")):
        services.append(
            Service(pid_file.stem, [], settings.run_dir.resolve(), settings.log_dir.resolve(), lambda: True)
        )
    return services


def replay(settings: Settings, from_kafka: bool = False) -> int:
    """Stop the local workers, rebuild (``streams.replay``: from the raw tables, or from the Kafka
    log when ``from_kafka`` and the log is whole) and start the same number of workers (at least
    one) again; returns how many were started. A refused replay changes nothing and restarts only
    the workers it stopped."""
    from streams import replay as rebuild

    workers = [s for s in _local_services(settings) if s.name.startswith("worker-")]
    if from_kafka:
        rebuild.check_log_whole(settings, members_allowed=True)  # before stopping anything
    for service in workers:
        stop(service)
    count = len(workers)
    try:
        if from_kafka:
            rebuild.check_log_whole(settings)
            rebuild.truncate(settings)
            rebuild.rewind(settings)
        else:
            rebuild.rebuild_facts(settings)
        count = max(count, 1)
    finally:
        for index in range(count):
            start(worker_service(settings, index))
    return count


def status(settings: Settings) -> dict[str, Any]:
    """Services with their state, topics with end offsets, tables with row counts, dead letters."""
    services: dict[str, Any] = {}
    for service in _local_services(settings):
        pid = read_pid(service)
        services[service.name] = {"running": pid is not None, "pid": pid}
        wanted = _wanted(settings, service.name)
        differ = differences(wanted) if wanted is not None else []
        if differ:
            services[service.name]["other_settings"] = differ
    kafka_ok = broker.broker_answers(settings)
    ch_ok = endpoint_answers(settings)
    services["kafka"] = {**services.get("kafka", {}), "answers": kafka_ok, "address": settings.bootstrap_servers}
    services["clickhouse"] = {
        **services.get("clickhouse", {}),
        "answers": ch_ok,
        "address": settings.clickhouse_endpoint_url,
    }
    result: dict[str, Any] = {
        "services": services,
        "topics": {},
        "tables": {},
        "dead_letters": {},
        "conflicts": {},
        "quarantined": [],
    }
    if kafka_ok:
        result["topics"] = broker.end_offsets(settings)
    if ch_ok:
        result["tables"], result["dead_letters"] = _table_counts(settings)
        if "attribution_conflicts" in result["tables"]:
            result["conflicts"] = _conflict_counts(settings)
        if "attribution_quarantine" in result["tables"]:
            result["quarantined"] = _quarantined(settings)
    return result


def _wanted(settings: Settings, name: str) -> Service | None:
    """The service as these settings would start it (the endpoint and the workers)."""
    if name == "clickhouse" and not settings.external_clickhouse:
        return endpoint_service(settings)
    if name.startswith("worker-"):
        return worker_service(settings, int(name.removeprefix("worker-")))
    return None


def _quarantined(settings: Settings) -> list[dict[str, Any]]:
    """Nodes whose attribution stopped on their own input, with the reason (``streams.attribution.step``)."""
    client = get_client(settings)
    try:
        rows = client.query(load_query("attribution_quarantine")).result_rows
    finally:
        client.close()
    return [{"cluster": c, "node": n, "reason": r, "since": since} for c, n, r, _, since, _ in rows]


def _conflict_counts(settings: Settings) -> dict[str, int]:
    """Windows (of their latest write) with claims beyond a GPU, per cluster (`report conflicts`)."""
    client = get_client(settings)
    try:
        rows = client.query(
            "SELECT c.cluster, count() FROM attribution_conflicts AS c FINAL INNER JOIN (SELECT cluster, node, "
            "window_start, max(version) AS latest FROM fact_windows GROUP BY cluster, node, window_start) AS w "
            "ON w.cluster = c.cluster AND w.node = c.node AND w.window_start = c.window_start "
            "AND w.latest = c.version GROUP BY c.cluster ORDER BY c.cluster"
        ).result_rows
        return {str(cluster): int(count) for cluster, count in rows}
    finally:
        client.close()


def _table_counts(settings: Settings) -> tuple[dict[str, int], dict[str, int]]:
    client = get_client(settings, database="default")
    try:
        rows = client.query(
            "SELECT name, total_rows FROM system.tables WHERE database = {db:String} ORDER BY name",
            parameters={"db": settings.clickhouse_database},
        ).result_rows
        tables = {str(name): int(count or 0) for name, count in rows}
        dlq: dict[str, int] = {}
        if "dead_letters" in tables:
            dlq_rows = client.query(
                f"SELECT topic, count() FROM `{settings.clickhouse_database}`.dead_letters FINAL GROUP BY topic"
            ).result_rows
            dlq = {str(t): int(c) for t, c in dlq_rows}
        return tables, dlq
    finally:
        client.close()
