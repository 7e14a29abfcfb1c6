"""One attribution step: close due windows and recompute dirty ones, for the nodes this worker owns.

A node's windows close when its event-time watermark (newest event time − allowed lateness)
passes them, or — for bounded input — when no new data arrived for that node for
``IDLE_FLUSH_S`` seconds, which closes everything up to its newest event. Either way only windows
that have ended on the wall clock close: the current window of a live node stays open until its
end has passed, so it is written once, not after every scrape. Activity that lands in windows
already written (late events) marks them dirty; they are recomputed from the raw tables and written
with a higher version: a correction, never a silent drop.

A step reads each node's samples from a short look-back before its range (a few of its scrape
intervals, ``streams.attribution.inputs``), not a fixed quarter of an hour, and costs one query
(the due nodes) when nothing is due.

A node whose computation fails on its own input (a stored allocation today's contract rejects,
or any error raised while computing it) is put in quarantine with the reason; the other nodes of
its group are written as usual. A quarantined node is tried again once newer input arrived for it
(at most every ``QUARANTINE_RETRY_S``), and leaves quarantine when that succeeds.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pipelines.events import one_line
from pipelines.settings import Settings
from pipelines.times import floor_seconds, from_epoch
from streams.attribution import inputs
from streams.attribution.fact_table import FactColumns
from streams.attribution.inputs import LOOKBACK_S, StepMemory, between
from streams.attribution.node_range import INVENTORY_HORIZON_S, SampleColumns
from streams.attribution.ranges import compute_range_full
from streams.attribution.rows import NodeFacts
from streams.attribution.state import HISTORY_S, IDLE_FLUSH_S, RECHECK_S, StepState, idle, recheck_at
from streams.attribution.warehouse import AttributionWarehouse, PendingNode, Quarantine

__all__ = [
    "HISTORY_S",
    "IDLE_FLUSH_S",
    "LOOKBACK_S",
    "RECHECK_S",
    "Plan",
    "StepReport",
    "StepState",
    "groups",
    "plan",
    "plans",
    "recheck_at",
    "run_step",
]

log = logging.getLogger(__name__)
# What one query loads and one insert writes, at most: this bounds the worker's memory (a backlog
# is worked off in rounds of this size) while a live tick of a large cluster stays one query.
CHUNK_S = 3600  # of one node's range per round
MAX_NODES_PER_QUERY = 256
NODE_SECONDS_PER_QUERY = 32 * 3600  # the sum of the ranges of one group of nodes
QUARANTINE_RETRY_S = 10.0
HOUR_S = 3600  # the hourly rollup's unit (``streams.rollup``)
LINGER_S = 30.0  # the longest a node catching up waits (wall clock) for its input to pause


@dataclass
class StepReport:
    nodes: int = 0
    windows: int = 0
    facts: int = 0
    quarantined: int = 0  # nodes put in quarantine by this step
    rebuilds_pending: int = 0  # requested rollup rebuilds (org versions) left after this step


def plan(
    row: PendingNode | Sequence[Any], settings: Settings, now_ns: int, drained_ns: int | None = None
) -> tuple[float, float] | None:
    """The [start, end) range to (re)compute for one node, or None when nothing is due
    (``drained_ns``: when the worker last found its input drained, ``state.idle``)."""
    r = row if isinstance(row, PendingNode) else PendingNode.from_row(row)
    w = settings.window_seconds
    max_t = r.max_time.timestamp()
    closed = r.closed_until.timestamp() if r.closed_until is not None else None
    target = (
        floor_seconds(max_t, w) + w
        if idle(r, now_ns, drained_ns)
        else floor_seconds(max_t - settings.allowed_lateness_seconds, w)
    )
    # only windows that have ended on the wall clock: the current one is still open, whatever the
    # event times say (an event time within the future tolerance, see ``decode_batch``, included)
    target = min(target, floor_seconds(now_ns / 1e9, w))
    start = closed if closed is not None else floor_seconds(r.first_time.timestamp(), w)
    if r.pending and closed is not None and r.dirty_from is not None:
        start = min(start, floor_seconds(r.dirty_from.timestamp(), w))
    end = max(target, closed or target)
    if end <= start or (not r.pending and closed is not None and target <= closed):
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
    whole: bool = True  # the node's whole due range (False: cut at an hour while it catches up)


def plans(
    rows: Iterable[PendingNode | Sequence[Any]],
    settings: Settings,
    now_ns: int,
    owns: Callable[[str, str], bool],
    quarantined: dict[tuple[str, str], Quarantine] | None = None,
    waiting: dict[tuple[str, str], float] | None = None,
    ingesting: bool = False,
    drained_ns: int | None = None,
) -> list[Plan]:
    """The due ranges of the nodes this worker owns (a quarantined node only once newer input came).

    With ``waiting`` (what a worker's steps carry: since when each node catching up has been due), a
    node catching up (``catching_up_to``) waits for the worker's input to pause (``ingesting``
    false), at most ``LINGER_S``: a backlog is then ingested first and computed in a few large
    steps, instead of every step computing the little that arrived meanwhile while the ingest
    competes with it for the process and the warehouse (and, in that time, allocation events
    arriving after the samples dirty windows already written)."""
    out: list[Plan] = []
    lingering: set[tuple[str, str]] = set()
    now = now_ns / 1e9
    for row in rows:
        r = row if isinstance(row, PendingNode) else PendingNode.from_row(row)
        if not owns(r.cluster, r.node):
            continue
        held = (quarantined or {}).get((r.cluster, r.node))
        if held is not None and (r.last_seq <= held.input_seq or now_ns - held.tried_seq < QUARANTINE_RETRY_S * 1e9):
            continue
        span = plan(r, settings, now_ns, drained_ns)
        if span is None:
            continue
        start, end = span
        whole = catching_up_to(r, start, end, settings.window_seconds, now_ns, ingesting, drained_ns)
        if whole is None:
            out.append(Plan(r.cluster, r.node, start, end, r.last_seq, r.processed_seq, r.last_seq))
        elif waiting is not None and now - waiting.setdefault((r.cluster, r.node), now) < LINGER_S:
            lingering.add((r.cluster, r.node))
        elif whole > start:  # the rest waits for its hour to fill, as if the watermark were lower
            out.append(Plan(r.cluster, r.node, start, whole, r.last_seq, r.processed_seq, r.last_seq, whole=False))
    if waiting is not None:  # a node computed, or no longer due, waits afresh next time
        for key in waiting.keys() - lingering:
            del waiting[key]
    return out


def catching_up_to(
    r: PendingNode,
    start: float,
    end: float,
    w: int,
    now_ns: int,
    ingesting: bool = False,
    drained_ns: int | None = None,
) -> float | None:
    """Where a node catching up on history computes to now: the last hour boundary of its due
    range (on the window grid), or None when the whole range is computed now.

    A node is catching up while input is still arriving (the node is not idle, or the worker is
    still ``ingesting``: a node's partition may pause while the others catch up) and its due range
    ends more than ``HISTORY_S`` before the wall clock: a backlog or a replay. Its steps would each see a
    fraction of an hour and rebuild that hour's rollup every time; computed a whole hour at a
    time, each hour is rebuilt once and each step's queries serve an hour of the node. The facts
    are the same (the range is only cut, never changed), and a live node, whose range ends near
    the wall clock, and an idle one, whose input is complete, are computed at once as before."""
    if (idle(r, now_ns, drained_ns) and not ingesting) or now_ns / 1e9 - end <= HISTORY_S:
        return None
    whole = floor_seconds(floor_seconds(end, HOUR_S), w)
    return None if whole >= end else whole


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


def run_step(
    wh: AttributionWarehouse, settings: Settings, owns: Callable[[str, str], bool], state: StepState | None = None
) -> StepReport:
    """Compute every due range of the owned nodes, a chunk of each node per round.

    A round handles groups of nodes with four queries and one insert per table per group (a live
    step is one group); a group's inserts run behind, while the next group is read and computed,
    and the hours those groups wrote are rebuilt in the rollup together when the step ends.
    A node's progress reaches its activity seq only with its last chunk, so a crash in between
    redoes the whole range (the facts are idempotent). ``state`` carries what the worker learnt
    (each node's scrape interval, when rebuilds were last looked for) to the next step.
    """
    given = state is not None
    state = state or StepState()
    report = StepReport()
    now_ns = time.time_ns()
    remaining: list[Plan] = []
    quarantined: dict[tuple[str, str], Quarantine] = {}
    later = -math.inf  # when the next step must read the due nodes once this one has written
    if not state.may_skip(now_ns / 1e9):
        seen = state.activity  # before the read: a batch written during it makes the next step read again
        rows = wh.pending_nodes()
        waiting, ingesting = (state.waiting, state.ingesting()) if given else (None, False)
        drained = state.drained_ns
        remaining = plans(rows, settings, now_ns, owns, waiting=waiting, ingesting=ingesting, drained_ns=drained)
        if remaining:  # the quarantine matters only for nodes that are due
            quarantined = wh.quarantined()
            remaining = plans(rows, settings, now_ns, owns, quarantined, waiting, ingesting, drained)
        state.seen, state.read_at = seen, now_ns / 1e9
        state.open_from = floor_seconds(now_ns / 1e9, settings.window_seconds)
        # each due range is computed below (a chunk at a time): once it is written nothing more comes
        # due before ``recheck_at`` (streams.attribution.state); until the writes succeeded, while
        # nodes wait, and after a range cut at an hour (the rest is due as the input goes on), the
        # next step reads them again
        cut = state.waiting or not all(p.whole for p in remaining)
        later = -math.inf if cut else recheck_at(rows, settings, now_ns, owns, drained)
        state.recheck_at = -math.inf if remaining else later
    report.nodes = len(remaining)
    behind = False
    try:
        while remaining:
            chunks = [_chunk(p) for p in remaining]
            failed: set[tuple[str, str]] = set()
            todo = groups(chunks)
            # behind when another group follows (a live step is one group: written at once), and
            # so is the rest of a step once it has begun so: their rollup is rebuilt together
            behind = behind or len(todo) > 1 or any(c.end < p.end for p, c in zip(remaining, chunks, strict=True))
            for group in todo:
                failed |= _compute_group(wh, settings, group, report, quarantined, state.memory, behind)
            remaining = [
                replace(p, start=c.end)
                for p, c in zip(remaining, chunks, strict=True)
                if c.end < p.end and (p.cluster, p.node) not in failed
            ]
    finally:  # every group's facts written before the step ends, and a failed write raised
        wh.written()
    if report.nodes:
        state.recheck_at = later
    # after the facts: an org version's hours, a bounded part per step (every worker may do it: idempotent)
    if state.rebuilds_due(time.monotonic()):
        state.rebuilds_pending = report.rebuilds_pending = wh.work_rollup_rebuilds()
        state.rebuilds_checked = time.monotonic()
    return report


def _chunk(p: Plan) -> Plan:
    end = min(p.end, p.start + CHUNK_S)
    return replace(p, end=end, processed_seq=p.processed_seq if end >= p.end else p.previous_seq)


def _load_samples(
    wh: AttributionWarehouse, cluster: str, group: list[Plan], memory: StepMemory
) -> tuple[dict[str, SampleColumns], dict[str, float]]:
    """Each node's samples from its own look-back to its range end, and that look-back; a node whose
    samples state a longer interval than its look-back assumed is read again with ``LOOKBACK_S``."""
    look = {p.node: memory.lookback((cluster, p.node)) for p in group}
    hi = max(p.end for p in group)
    loaded = min(p.start - look[p.node] for p in group)
    samples = wh.samples(cluster, [p.node for p in group], from_epoch(loaded), from_epoch(hi))
    again = [
        p for p in group if not inputs.enough(between(samples.get(p.node), p.start - look[p.node], p.end), look[p.node])
    ]
    if again:
        loaded = min(p.start for p in again) - LOOKBACK_S
        samples.update(wh.samples(cluster, [p.node for p in again], from_epoch(loaded), from_epoch(hi)))
        look.update((p.node, LOOKBACK_S) for p in again)
    return samples, look


def _compute_group(
    wh: AttributionWarehouse,
    settings: Settings,
    group: list[Plan],
    report: StepReport,
    quarantined: dict[tuple[str, str], Quarantine],
    memory: StepMemory,
    behind: bool = False,
) -> set[tuple[str, str]]:
    """Compute and write one group's chunks (``behind``: on the write-behind thread, while the
    caller goes on to the next group); returns the nodes that failed (now in quarantine)."""
    cluster = group[0].cluster
    nodes = [p.node for p in group]
    lo, hi = min(p.start for p in group), max(p.end for p in group)
    samples, look = _load_samples(wh, cluster, group, memory)
    rejected: dict[str, str] = {}
    placements = inputs.placements(wh, cluster, nodes, from_epoch(lo), from_epoch(hi), rejected)
    # the inventory gives each GPU's state before the node's own look-back (a fatal XID long ago, a
    # GPU that stopped reporting): a node sees its own range plus look-back whatever its group loaded
    own_loaded = {p.node: from_epoch(p.start - look[p.node]) for p in group}
    node_inputs = wh.node_inputs(cluster, nodes, from_epoch(lo), from_epoch(hi), own_loaded, INVENTORY_HORIZON_S)
    batch: list[NodeFacts] = []
    changes: list[Quarantine] = []
    for p in group:
        key = (cluster, p.node)
        # each node sees exactly its own range (plus look-back), whatever its group loaded
        own = between(samples.get(p.node), p.start - look[p.node], p.end)
        try:
            if p.node in rejected:
                raise ValueError(rejected[p.node])
            result = compute_range_full(
                cluster,
                p.node,
                p.start,
                p.end,
                settings.window_seconds,
                own,
                placements.get(p.node, []),
                node_inputs.get(p.node),
            )
        except Exception as exc:  # this node's input breaks its computation: the others go on
            log.error("node %s/%s quarantined: %s", cluster, p.node, exc)
            held = quarantined.get(key)
            entry = Quarantine(
                cluster, p.node, one_line(exc), p.input_seq, held.since if held else from_epoch(time.time())
            )
            quarantined[key] = entry
            changes.append(entry)
            continue
        memory.saw(key, own)
        if key in quarantined:
            del quarantined[key]
            changes.append(Quarantine(cluster, p.node, "", p.input_seq, from_epoch(time.time())))
        batch.append(_node_facts(p, settings.window_seconds, result.columns, result.windows))
        report.windows += len(batch[-1].windows)
        report.facts += len(result.columns)
    if behind:
        wh.write_behind(batch)  # while the next group is read and computed
    else:
        wh.written()  # a write behind of an earlier group comes first
        wh.write_fact_batch(batch)
    if changes:
        wh.write_quarantine(changes)
        report.quarantined += sum(1 for c in changes if c.reason)
    return {(c.cluster, c.node) for c in changes if c.reason}


def _node_facts(p: Plan, w: int, facts: FactColumns, windows: dict[float, Any]) -> NodeFacts:
    starts = [from_epoch(t) for t in _frange(p.start, p.end, w)]
    inventory = {from_epoch(t): v for t, v in windows.items()}
    return NodeFacts(p.cluster, p.node, starts, facts, from_epoch(p.end), p.processed_seq, inventory, w)


def _frange(start: float, end: float, step: int) -> list[float]:
    out = []
    t = start
    while t < end:
        out.append(t)
        t += step
    return out
