"""Prometheus metrics each gpuledger process counts itself (``prometheus_client``'s default
registry), and the ``/metrics`` listener that serves them.

The stream workers count events consumed and dead-lettered, facts written and each attribution
step; the collectors count polls, failed polls and events published. ``gpuledger serve`` adds the
shared state (lag, freshness, quarantined nodes: ``gpuledger.serve.metrics``).
"""

from __future__ import annotations

import logging

from prometheus_client import Counter, Histogram, start_http_server

log = logging.getLogger(__name__)

EVENTS_CONSUMED = Counter(
    "gpuledger_events_consumed", "Valid events a stream worker wrote to the raw tables", ["topic"]
)
DEAD_LETTERED = Counter(
    "gpuledger_events_dead_lettered", "Messages a stream worker turned into dead letters", ["topic", "reason"]
)
FACTS_WRITTEN = Counter("gpuledger_facts_written", "Attribution fact rows written")
WINDOWS_WRITTEN = Counter("gpuledger_attribution_windows_written", "Node-windows attributed (first time or again)")
NODES_QUARANTINED = Counter("gpuledger_nodes_quarantined", "Times a node was put in quarantine")
STEP_SECONDS = Histogram(
    "gpuledger_attribution_step_duration_seconds",
    "Duration of one attribution step",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
)
STEP_FAILURES = Counter("gpuledger_attribution_step_failures", "Attribution steps that failed and will be retried")
COLLECTOR_POLLS = Counter("gpuledger_collector_polls", "Successful polls of a collector", ["collector"])
COLLECTOR_POLL_ERRORS = Counter("gpuledger_collector_poll_errors", "Failed polls of a collector", ["collector"])
COLLECTOR_EVENTS = Counter("gpuledger_collector_events_published", "Events a collector published", ["collector"])


def reason_class(reason: str) -> str:
    """A dead letter's reason without its details, so the label stays low-cardinality."""
    head = reason.split(":", 1)[0].strip()
    return " ".join(head.split()[:6])[:60] or "unknown"


def serve_metrics(port: int, host: str = "127.0.0.1") -> None:
    """Serve this process's metrics on ``http://host:port/metrics`` (a daemon thread); 0 = off."""
    if port:
        start_http_server(port, addr=host)
        log.info("metrics on http://%s:%d/metrics", host, port)
