"""Live GPU metrics → ``gpu.sample`` events (topic ``gpu.metrics``): a node's scrape, or several of
its scrapes in one event (version 3) where the input holds them (a ``query_range`` answer).

Two ways to read dcgm-exporter (a file of scrapes or of a ``query_range`` answer is
``gpuledger ingest dcgm``):

* **Prometheus** (:func:`prometheus_collector`): ``query_range`` over the DCGM fields the parser
  reads (:data:`METRICS`), step = the scrape interval, window by window
  (:mod:`pipelines.collectors.prometheus`). A closed range (``start`` and ``end``) is read once;
  without an end the collector follows, each poll reading the instants settled since the last.
  Sample time = the evaluation instant; ``interval_s`` of every event = the step.
* **Direct scrape** (:func:`exporter_collector`): GET each dcgm-exporter ``/metrics`` per poll
  (:mod:`pipelines.collectors.scrape`); sample time = when the scrape was sent, unless the
  exporter stamps its lines itself.

Parsing, label versions (``Hostname``/``hostname``), MIG, blank sentinels and dead letters are
:mod:`pipelines.parsers.dcgm`'s business.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from pipelines.collectors.prometheus import PrometheusRange, range_collector
from pipelines.collectors.scrape import ExporterScrape
from pipelines.parsers import dcgm
from pipelines.parsers.base import ParseResult

SOURCE = dcgm.SOURCE
METRICS: tuple[str, ...] = tuple(dcgm.FIELDS)


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
    """DCGM series from Prometheus over ``start..end`` (either may be open; see the module docstring)."""

    def parse(answer: list[Any], origin: str) -> ParseResult:
        return dcgm.parse_query_range(answer, cluster=cluster, interval_s=float(step_s), origin=origin)

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
    interval_s: float | None = None,
    timeout_s: float = 10.0,
    clock: Callable[[], float] = time.time,
) -> ExporterScrape:
    """Scrape dcgm-exporter endpoints directly; ``interval_s`` (the poll interval) is stamped on
    the events as their scrape interval."""

    def parse(body: bytes, when: datetime, node_hint: str | None, origin: str) -> ParseResult:
        return dcgm.parse_exposition(
            body, cluster=cluster, scrape_time=when, node=node_hint, interval_s=interval_s, origin=origin
        )

    return ExporterScrape(source=SOURCE, urls=urls, parse=parse, node=node, timeout_s=timeout_s, clock=clock)
