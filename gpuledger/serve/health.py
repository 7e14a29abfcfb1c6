"""Readiness: Kafka and ClickHouse answer, messages that wait have a stream worker to consume them,
and no node's consumed input has been waiting too long for attribution."""

from __future__ import annotations

import time
from typing import Any

from pipelines.settings import Settings
from sql import load_query
from sql.client import get_client
from streams.progress import waiting


def stalled_nodes(
    rows: list[tuple[Any, ...]], held: set[tuple[str, str]], stall_after_s: float, now_ns: int | None = None
) -> list[tuple[str, str]]:
    """Nodes with input not yet attributed (``attribution_pending`` rows) whose newest activity is
    older than ``stall_after_s``: a worker should have computed them by now. Quarantined nodes are
    reported as such, not as stalled."""
    now_ns = now_ns or time.time_ns()
    out = []
    for row in rows:
        cluster, node, last_seq = row[0], row[1], row[4]
        if waiting(row) and (cluster, node) not in held and (now_ns - int(last_seq)) / 1e9 > stall_after_s:
            out.append((str(cluster), str(node)))
    return out


def readiness(settings: Settings, stall_after_s: float) -> tuple[bool, dict[str, Any]]:
    from infra.kafka.broker import broker_answers
    from infra.services import endpoint_answers

    checks: dict[str, Any] = {"kafka": broker_answers(settings), "clickhouse": endpoint_answers(settings)}
    if checks["kafka"]:
        from streams.progress import consumer_lag, group_members

        behind = sum(consumer_lag(settings).values())
        checks["consumer_lag_messages"] = behind
        checks["stream_workers_active"] = group_members(settings) != 0
        if behind and not checks["stream_workers_active"]:
            checks["reason"] = f"{behind} messages wait and no stream worker consumes them"
    if checks["clickhouse"]:
        client = get_client(settings, reader=True)
        try:
            rows = [tuple(r) for r in client.query(load_query("attribution_pending")).result_rows]
            held = {(str(c), str(n)) for c, n, *_ in client.query(load_query("attribution_quarantine")).result_rows}
        finally:
            client.close()
        stalled = stalled_nodes(rows, held, stall_after_s)
        checks["stalled_nodes"] = len(stalled)
        checks["quarantined_nodes"] = len(held)
    if checks.get("stalled_nodes"):
        checks["reason"] = (
            f"{checks['stalled_nodes']} nodes' input waits more than {stall_after_s:.0f} s for attribution"
        )
    ready = bool(checks["kafka"] and checks["clickhouse"] and "reason" not in checks)
    return ready, checks
