"""One attribution step: close due windows and recompute dirty ones, for the nodes this worker owns.

A node's windows close when its event-time watermark (newest event time − allowed lateness)
passes them, or — for bounded input — when no new data arrived for that node for
``IDLE_FLUSH_S`` seconds, which closes everything up to its newest event. Activity that lands in
windows already written (late events) marks them dirty; they are recomputed from the raw tables
and written with a higher version: a correction, never a silent drop.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from pipelines.settings import Settings
from streams.attribution.compute import compute_range
from streams.store import Warehouse, to_utc

log = logging.getLogger(__name__)
IDLE_FLUSH_S = 2.0
LOOKBACK_S = 900.0  # samples before a range start, for sample-and-hold and XID state
CHUNK_S = 6 * 3600  # compute at most this much of one node per query round trip


@dataclass
class StepReport:
    nodes: int = 0
    windows: int = 0
    facts: int = 0


def _floor(t: float, w: int) -> float:
    return math.floor(t / w) * w


def plan(row: tuple[object, ...], settings: Settings, now_ns: int) -> tuple[float, float] | None:
    """The [start, end) range to (re)compute for one node, or None when nothing is due."""
    _, _, first_time, max_time, last_seq, pending, dirty_from, closed_until, _processed = row
    w = settings.window_seconds
    max_t = max_time.timestamp()  # type: ignore[attr-defined]
    closed = closed_until.timestamp() if closed_until and closed_until.timestamp() > 0 else None  # type: ignore[attr-defined]
    idle = (now_ns - int(last_seq)) / 1e9 >= IDLE_FLUSH_S  # type: ignore[call-overload]
    target = _floor(max_t, w) + w if idle else _floor(max_t - settings.allowed_lateness_seconds, w)
    start = closed if closed is not None else _floor(first_time.timestamp(), w)  # type: ignore[attr-defined]
    if pending and closed is not None:
        start = min(start, _floor(dirty_from.timestamp(), w))  # type: ignore[attr-defined]
    end = max(target, closed or target)
    if end <= start or (not pending and closed is not None and target <= closed):
        return None
    return start, end


def run_step(wh: Warehouse, settings: Settings, owns: Callable[[str, str], bool]) -> StepReport:
    report = StepReport()
    now_ns = time.time_ns()
    for row in wh.pending_nodes():
        cluster, node = str(row[0]), str(row[1])
        if not owns(cluster, node):
            continue
        span = plan(row, settings, now_ns)
        if span is None:
            continue
        report.nodes += 1
        start, end = span
        w = settings.window_seconds
        chunk_start = start
        while chunk_start < end:
            chunk_end = min(end, chunk_start + CHUNK_S)
            a, b = to_utc(chunk_start), to_utc(chunk_end)
            samples = wh.samples(cluster, node, a - timedelta(seconds=LOOKBACK_S), b)
            placements = wh.placements(cluster, node, a, b)
            facts = compute_range(cluster, node, chunk_start, chunk_end, w, samples, placements)
            windows = [to_utc(t) for t in _frange(chunk_start, chunk_end, w)]
            closed = to_utc(chunk_end)
            processed = int(row[4]) if chunk_end >= end else int(row[8] or 0)
            wh.write_facts(cluster, node, windows, w, facts, closed, processed)
            report.windows += len(windows)
            report.facts += len(facts)
            chunk_start = chunk_end
    return report


def _frange(start: float, end: float, step: int) -> list[float]:
    out = []
    t = start
    while t < end:
        out.append(t)
        t += step
    return out
