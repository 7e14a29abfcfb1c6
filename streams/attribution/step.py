"""One attribution step: close due windows and recompute dirty ones, for the nodes this worker owns.

A node's windows close when its event-time watermark (newest event time − allowed lateness)
passes them, or — for bounded input — when no new data arrived for that node for
``IDLE_FLUSH_S`` seconds, which closes everything up to its newest event. Activity that lands in
windows already written (late events) marks them dirty; they are recomputed from the raw tables
and written with a higher version: a correction, never a silent drop.

A node whose computation fails on its own input (a stored allocation today's contract rejects,
or any error raised while computing it) is put in quarantine with the reason; the other nodes of
its group are written as usual. A quarantined node is tried again once newer input arrived for it
(at most every ``QUARANTINE_RETRY_S``), and leaves quarantine when that succeeds.
"""

from __future__ import annotations

import bisect
import logging
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from pipelines.events import one_line
from pipelines.settings import Settings
from streams.attribution.compute import INVENTORY_HORIZON_S, SampleColumns, compute_range_full
from streams.store import NodeFacts, Quarantine, Warehouse, to_utc

log = logging.getLogger(__name__)
IDLE_FLUSH_S = 2.0
LOOKBACK_S = 900.0  # samples before a range start, for sample-and-hold and XID state
# What one query loads and one insert writes, at most: this bounds the worker's memory (a backlog
# is worked off in rounds of this size) while a live tick of a large cluster stays one query.
CHUNK_S = 3600  # of one node's range per round
MAX_NODES_PER_QUERY = 256
NODE_SECONDS_PER_QUERY = 32 * 3600  # the sum of the ranges of one group of nodes
QUARANTINE_RETRY_S = 10.0


@dataclass
class StepReport:
    nodes: int = 0
    windows: int = 0
    facts: int = 0
    quarantined: int = 0  # nodes put in quarantine by this step
    rebuilds_pending: int = 0  # requested rollup rebuilds (org versions) left after this step


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
    # never a window that has not begun on the wall clock (an event time within the future
    # tolerance, see ``decode_batch``, closes at most the current window)
    target = min(target, _floor(now_ns / 1e9, w) + w)
    start = closed if closed is not None else _floor(first_time.timestamp(), w)  # type: ignore[attr-defined]
    if pending and closed is not None:
        start = min(start, _floor(dirty_from.timestamp(), w))  # type: ignore[attr-defined]
    end = max(target, closed or target)
    if end <= start or (not pending and closed is not None and target <= closed):
        return None
    return start, end


@dataclass(frozen=True)
class Plan:
    """A node's range to compute, and the progress seq it reaches once all of it is written."""

    cluster: str
    node: str
    start: float
    end: float
    processed_seq: int  # the activity seq included once ``end`` is written
    previous_seq: int  # what progress keeps while only part of the range is written
    input_seq: int = 0  # the node's newest activity seq


def plans(
    rows: Iterable[tuple[object, ...]],
    settings: Settings,
    now_ns: int,
    owns: Callable[[str, str], bool],
    quarantined: dict[tuple[str, str], Quarantine] | None = None,
) -> list[Plan]:
    """The due ranges of the nodes this worker owns (a quarantined node only once newer input came)."""
    out: list[Plan] = []
    for row in rows:
        cluster, node = str(row[0]), str(row[1])
        if not owns(cluster, node):
            continue
        last_seq = int(row[4])  # type: ignore[call-overload]
        held = (quarantined or {}).get((cluster, node))
        if held is not None and (last_seq <= held.input_seq or now_ns - held.tried_seq < QUARANTINE_RETRY_S * 1e9):
            continue
        span = plan(row, settings, now_ns)
        if span is not None:
            out.append(Plan(cluster, node, span[0], span[1], last_seq, int(row[8] or 0), last_seq))  # type: ignore[call-overload]
    return out


def groups(todo: Sequence[Plan]) -> list[list[Plan]]:
    """Nodes of one cluster whose ranges are close, so one query serves all of them."""
    out: list[list[Plan]] = []
    load = 0.0
    for p in sorted(todo, key=lambda p: (p.cluster, p.start, p.node)):
        current = out[-1] if out else None
        if (
            current is None
            or current[0].cluster != p.cluster
            or len(current) >= MAX_NODES_PER_QUERY
            or p.end - current[0].start > 2 * CHUNK_S
            or load + (p.end - p.start) > NODE_SECONDS_PER_QUERY
        ):
            out.append([p])
            load = p.end - p.start
        else:
            current.append(p)
            load += p.end - p.start
    return out


def run_step(wh: Warehouse, settings: Settings, owns: Callable[[str, str], bool]) -> StepReport:
    """Compute every due range of the owned nodes, a chunk of each node per round.

    A round handles groups of nodes with two queries and three inserts per group. A node's
    progress reaches its activity seq only with its last chunk, so a crash in between redoes the
    whole range (the facts are idempotent).
    """
    report = StepReport()
    quarantined = wh.quarantined()
    remaining = plans(wh.pending_nodes(), settings, time.time_ns(), owns, quarantined)
    report.nodes = len(remaining)
    while remaining:
        chunks = [_chunk(p) for p in remaining]
        failed: set[tuple[str, str]] = set()
        for group in groups(chunks):
            failed |= _compute_group(wh, settings, group, report, quarantined)
        remaining = [
            replace(p, start=c.end)
            for p, c in zip(remaining, chunks, strict=True)
            if c.end < p.end and (p.cluster, p.node) not in failed
        ]
    # after the facts: an org version's hours, a bounded part per step (every worker may do it: idempotent)
    report.rebuilds_pending = wh.work_rollup_rebuilds()
    return report


def _chunk(p: Plan) -> Plan:
    end = min(p.end, p.start + CHUNK_S)
    return replace(p, end=end, processed_seq=p.processed_seq if end >= p.end else p.previous_seq)


def _compute_group(
    wh: Warehouse,
    settings: Settings,
    group: list[Plan],
    report: StepReport,
    quarantined: dict[tuple[str, str], Quarantine],
) -> set[tuple[str, str]]:
    """Compute and write one group's chunks; returns the nodes that failed (now in quarantine)."""
    w = settings.window_seconds
    cluster = group[0].cluster
    nodes = [p.node for p in group]
    lo, hi = min(p.start for p in group), max(p.end for p in group)
    loaded = lo - LOOKBACK_S
    samples = wh.samples(cluster, nodes, to_utc(loaded), to_utc(hi))
    rejected: dict[str, str] = {}
    placements = wh.placements(cluster, nodes, to_utc(lo), to_utc(hi), rejected)
    # the inventory gives each GPU's state before the node's own look-back (a fatal XID long ago, a
    # GPU that stopped reporting): a node sees its own range plus look-back whatever its group loaded
    own_loaded = {p.node: to_utc(p.start - LOOKBACK_S) for p in group}
    inputs = wh.node_inputs(cluster, nodes, to_utc(lo), to_utc(hi), own_loaded, INVENTORY_HORIZON_S)
    batch: list[NodeFacts] = []
    changes: list[Quarantine] = []
    for p in group:
        key = (cluster, p.node)
        # each node sees exactly its own range (plus look-back), whatever its group loaded
        own = _between(samples.get(p.node), p.start - LOOKBACK_S, p.end)
        try:
            if p.node in rejected:
                raise ValueError(rejected[p.node])
            result = compute_range_full(
                cluster, p.node, p.start, p.end, w, own, placements.get(p.node, []), inputs.get(p.node)
            )
        except Exception as exc:  # this node's input breaks its computation: the others go on
            log.error("node %s/%s quarantined: %s", cluster, p.node, exc)
            held = quarantined.get(key)
            entry = Quarantine(cluster, p.node, one_line(exc), p.input_seq, held.since if held else to_utc(time.time()))
            quarantined[key] = entry
            changes.append(entry)
            continue
        if key in quarantined:
            del quarantined[key]
            changes.append(Quarantine(cluster, p.node, "", p.input_seq, to_utc(time.time())))
        windows = [to_utc(t) for t in _frange(p.start, p.end, w)]
        inventory = {to_utc(t): v for t, v in result.windows.items()}
        batch.append(NodeFacts(cluster, p.node, windows, result.facts, to_utc(p.end), p.processed_seq, inventory, w))
        report.windows += len(windows)
        report.facts += len(result.facts)
    wh.write_fact_batch(batch)
    if changes:
        wh.write_quarantine(changes)
        report.quarantined += sum(1 for c in changes if c.reason)
    return {(c.cluster, c.node) for c in changes if c.reason}


def _between(samples: SampleColumns | None, start: float, end: float) -> SampleColumns:
    """The samples with start <= time < end (columns are in time order)."""
    if samples is None:
        return SampleColumns(())
    times = samples.columns[0]
    lo, hi = bisect.bisect_left(times, start), bisect.bisect_left(times, end)
    if lo == 0 and hi == len(times):
        return samples
    return SampleColumns(tuple(c[lo:hi] for c in samples.columns))


def _frange(start: float, end: float, step: int) -> list[float]:
    out = []
    t = start
    while t < end:
        out.append(t)
        t += step
    return out
