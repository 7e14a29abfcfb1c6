"""Live storage throughput counters → ``storage.counters`` events (topic ``storage.io``).

From Prometheus (:func:`prometheus_collector`: ``query_range`` over node_exporter disk and NFS,
Lustre and GPFS byte counters, :data:`METRICS`) or by scraping node_exporter / Lustre / GPFS
exporters' ``/metrics`` directly (:func:`exporter_collector`). Windows, steps and lag work as for
the dcgm collector (:mod:`pipelines.collectors.prometheus`). node_exporter series name no host:
in Prometheus mode the node is the host part of ``instance``; when scraping, the ``node`` given,
else the URL's host. Parsing and pairing of read/write counters:
:mod:`pipelines.parsers.storage`. Checkpoint events come from files (``gpuledger ingest storage``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from pipelines.collectors.prometheus import PrometheusRange, range_collector
from pipelines.collectors.scrape import ExporterScrape
from pipelines.parsers import storage
from pipelines.parsers.base import ParseResult

SOURCE = storage.SOURCE
METRICS: tuple[str, ...] = tuple(storage.METRICS)


def prometheus_collector(
    url: str,
    *,
    cluster: str,
    step_s: int = 30,
    start: datetime | None = None,
    end: datetime | None = None,
    lag_s: float | None = None,
    match: str | None = None,
    max_points: int = 360,
    backfill_s: float | None = None,
    timeout_s: float = 30.0,
    client: Any = None,
    clock: Callable[[], float] = time.time,
) -> PrometheusRange:
    def parse(answer: list[Any], origin: str) -> ParseResult:
        return storage.parse_query_range(answer, cluster=cluster, origin=origin)

    return range_collector(
        url,
        source=SOURCE,
        metrics=METRICS,
        parse=parse,
        step_s=step_s,
        start=start,
        end=end,
        lag_s=lag_s,
        match=match,
        max_points=max_points,
        backfill_s=backfill_s,
        timeout_s=timeout_s,
        client=client,
        clock=clock,
    )


def exporter_collector(
    urls: list[str],
    *,
    cluster: str,
    node: str | None = None,
    timeout_s: float = 10.0,
    clock: Callable[[], float] = time.time,
) -> ExporterScrape:
    def parse(body: bytes, when: datetime, node_hint: str | None, origin: str) -> ParseResult:
        return storage.parse_exposition(body, cluster=cluster, scrape_time=when, node=node_hint, origin=origin)

    return ExporterScrape(source=SOURCE, urls=urls, parse=parse, node=node, timeout_s=timeout_s, clock=clock)
