"""The pipeline's state as Prometheus metrics, read from Kafka and the warehouse at each scrape.

What the stream workers count in their own process (events, dead letters, facts, step time) is
on their ``/metrics`` (``pipelines.process_metrics``); this collector adds what only the shared state knows:
consumer lag per topic and partition, attribution freshness, pending, stalled and quarantined
nodes per cluster, and dead letters in the warehouse by topic and reason.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from gpuledger.serve.health import stalled_nodes
from pipelines.process_metrics import reason_class
from pipelines.settings import Settings
from sql import load_query
from sql.client import get_client
from streams.progress import waiting

log = logging.getLogger(__name__)
STALL_AFTER_S = 600.0


class PipelineCollector(Collector):
    def __init__(self, settings: Settings, stall_after_s: float = STALL_AFTER_S) -> None:
        self._settings = settings
        self._stall_after_s = stall_after_s

    def collect(self) -> Iterator[Any]:
        up = GaugeMetricFamily(
            "gpuledger_scrape_source_up", "Whether Kafka / ClickHouse answered this scrape", labels=["source"]
        )
        try:
            yield from self._lag()
            up.add_metric(["kafka"], 1)
        except Exception as exc:  # a scrape never fails: the source is reported down
            log.warning("Kafka metrics unavailable: %s", exc)
            up.add_metric(["kafka"], 0)
        try:
            yield from self._warehouse()
            up.add_metric(["clickhouse"], 1)
        except Exception as exc:
            log.warning("warehouse metrics unavailable: %s", exc)
            up.add_metric(["clickhouse"], 0)
        yield up

    def _lag(self) -> Iterator[Any]:
        from streams.progress import consumer_lag, group_members

        lag = GaugeMetricFamily(
            "gpuledger_consumer_lag_messages",
            "Messages of a topic partition not yet consumed by the stream workers",
            labels=["topic", "partition"],
        )
        for (topic, partition), behind in sorted(consumer_lag(self._settings).items()):
            lag.add_metric([topic, str(partition)], behind)
        yield lag
        members = group_members(self._settings)
        if members is not None:
            yield GaugeMetricFamily(
                "gpuledger_stream_workers_active",
                "1 when stream workers are members of the consumer group, else 0",
                value=members,
            )

    def _warehouse(self) -> Iterator[Any]:
        client = get_client(self._settings, reader=True)
        try:
            pending = [tuple(r) for r in client.query(load_query("attribution_pending")).result_rows]
            held = [tuple(r) for r in client.query(load_query("attribution_quarantine")).result_rows]
            fresh = client.query(
                "SELECT cluster, max(closed_until) FROM (SELECT cluster, node, "
                "argMax(closed_until, version) AS closed_until FROM attribution_progress "
                "GROUP BY cluster, node) GROUP BY cluster"
            ).result_rows
            letters = client.query("SELECT topic, reason, count() FROM dead_letters FINAL GROUP BY topic, reason")
            letter_rows = letters.result_rows
        finally:
            client.close()
        now = time.time()
        freshness = GaugeMetricFamily(
            "gpuledger_attribution_freshness_seconds",
            "Wall clock minus the end of the newest attributed window",
            labels=["cluster"],
        )
        for cluster, closed in fresh:
            freshness.add_metric([str(cluster)], max(now - closed.timestamp(), 0.0))
        yield freshness
        held_keys = {(str(r[0]), str(r[1])) for r in held}
        stalled = stalled_nodes(pending, held_keys, self._stall_after_s)
        for name, doc, items in (
            (
                "gpuledger_attribution_pending_nodes",
                "Nodes with input not yet attributed",
                [(str(r[0]), str(r[1])) for r in pending if waiting(r)],
            ),
            (
                "gpuledger_attribution_stalled_nodes",
                f"Nodes whose input has waited more than {self._stall_after_s:.0f} s for attribution",
                stalled,
            ),
            ("gpuledger_quarantined_nodes", "Nodes whose attribution stopped on their own input", sorted(held_keys)),
        ):
            gauge = GaugeMetricFamily(name, doc, labels=["cluster"])
            counts: dict[str, int] = {}
            for cluster, _node in items:
                counts[cluster] = counts.get(cluster, 0) + 1
            for cluster, n in sorted(counts.items()):
                gauge.add_metric([cluster], n)
            yield gauge
        dead = CounterMetricFamily(
            "gpuledger_dead_letters", "Dead letters in the warehouse by topic and reason", labels=["topic", "reason"]
        )
        by: dict[tuple[str, str], int] = {}
        for topic, reason, n in letter_rows:
            key = (str(topic), reason_class(str(reason)))
            by[key] = by.get(key, 0) + int(n)
        for (topic, reason), n in sorted(by.items()):
            dead.add_metric([topic, reason], n)
        yield dead
