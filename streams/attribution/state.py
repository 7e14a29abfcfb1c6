"""What a worker's attribution steps carry from one to the next, and when a node can come due.

The due nodes change only with new activity (written by the worker's own sink: its partitions are
its nodes'), with its assignment (a rebalance), or with the wall clock (a node's idle flush, a
window's end). The worker's own writes make nothing due: a step computes each due node's range (a
chunk at a time), so once its writes succeeded nothing more comes due before ``recheck_at`` of the
rows it read (while a node catching up waits for the input to pause, or after its range was cut at
an hour, every step reads them). So a step may skip reading them while nothing was written and
nothing can have come due. Activity wholly in the window that was open when they were last read (a
live scrape) makes nothing due before that window ends, and the step reads them at its end anyway
(``recheck_at``): such a batch does not make the next step read them. At least every ``RECHECK_S``
a step reads them anyway (a node whose activity another worker wrote just before a rebalance).
Without a state (``run_step``'s default) every step reads them.

Requested rollup rebuilds (an org mapping version) are worked off in the step after the worker's
own sink recorded one (``rebuild_requested``); requests another worker's sink recorded are looked
for every ``REBUILD_CHECK_S``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from pipelines.settings import Settings
from pipelines.times import floor_seconds
from streams.attribution.inputs import StepMemory
from streams.attribution.warehouse import PendingNode

IDLE_FLUSH_S = 2.0  # a node without new data this long is bounded input: its ended windows close
HISTORY_S = 3600  # activity whose newest event is older than this (wall clock) is history being caught up on
RECHECK_S = 30.0  # the due nodes are read at least this often, whatever the worker's own sink wrote
REBUILD_CHECK_S = 60.0  # rebuilds requested elsewhere are looked for this often (each step while some are left)


def idle(r: PendingNode, now_ns: int, drained_ns: int | None = None) -> bool:
    """The node's input is bounded for now: it has had no new activity for ``IDLE_FLUSH_S``, or
    its newest event is history (older than ``HISTORY_S`` on the wall clock) and the worker found
    its whole input written (``drained_ns``, :meth:`StepState.drained`) after that activity was,
    so nothing more for the node waits in the log. A live node always waits ``IDLE_FLUSH_S``: a
    scrape slightly late for the window just ended still makes its first write."""
    if now_ns - r.last_seq >= IDLE_FLUSH_S * 1e9:
        return True
    return drained_ns is not None and r.last_seq <= drained_ns and now_ns / 1e9 - r.max_time.timestamp() > HISTORY_S


@dataclass
class StepState:
    """What a worker's steps carry from one to the next (``run_step`` without it starts afresh)."""

    memory: StepMemory = field(default_factory=StepMemory)
    rebuilds_checked: float = -math.inf  # monotonic time of the last look for requested rebuilds
    rebuilds_pending: int = 0
    activity: int = 0  # batches the worker's sink wrote (``touched``)
    touched_at: float = -math.inf  # monotonic time of the sink's last batch
    drained_ns: int | None = None  # epoch ns (as node activity seqs) the sinks last found every partition written
    paused: bool = False  # the sinks found the input drained after their last batch
    unsettled: bool = False  # a batch before the open window was written since the input was last found drained
    seen: int = -1  # ``activity`` when the due nodes were last read
    recheck_at: float = -math.inf  # epoch seconds from which a node may be due without new activity
    read_at: float = -math.inf
    open_from: float = math.inf  # epoch s: the start of the window open when the due nodes were last read
    assigned: frozenset[int] | None = None  # the partitions the worker owned at its last step
    waiting: dict[tuple[str, str], float] = field(default_factory=dict)  # nodes catching up: due since (epoch s)

    def touched(self, earliest: float | None = None) -> None:
        """The worker's sink wrote a batch whose node activity begins at ``earliest`` (epoch s;
        ``math.inf``: it has none, None: not known). Unless all of it lies in the window open at the
        last read, the next step reads the due nodes."""
        if earliest is None or earliest < self.open_from:
            self.activity += 1
            self.unsettled = True
        self.touched_at = time.monotonic()
        self.paused = False

    def owning(self, partitions: frozenset[int]) -> None:
        """The partitions the worker owns now: once they changed, the next step reads the due nodes."""
        if partitions != self.assigned:
            self.assigned = partitions
            self.activity += 1

    def rebuild_requested(self) -> None:
        """The worker's sink recorded a rollup rebuild request: the next step works it off."""
        self.rebuilds_checked = -math.inf

    def drained(self) -> None:
        """The worker's sinks have written every message of their partitions up to the newest
        offsets the consumer knows: the input has paused, whatever the time since the last batch."""
        self.drained_ns, self.paused = time.time_ns(), True
        if self.unsettled:  # history written since the last drain may be idle now: the next step reads the due nodes
            self.activity += 1  # (live scrapes in the open window are not history: drained after each, read nothing)
            self.unsettled = False

    def ingesting(self) -> bool:
        """The worker's sink wrote a batch within ``IDLE_FLUSH_S`` and has not found its input
        drained since: its input has not paused."""
        return time.monotonic() - self.touched_at < IDLE_FLUSH_S and not self.paused

    def may_skip(self, now: float) -> bool:
        return self.seen == self.activity and now < self.recheck_at and now - self.read_at < RECHECK_S

    def rebuilds_due(self, now: float) -> bool:
        return self.rebuilds_pending > 0 or now - self.rebuilds_checked >= REBUILD_CHECK_S

    def nothing_due(self, now: float, monotonic_now: float) -> bool:
        """A step now would run no statement (``may_skip``, no rebuilds due): the worker's tick
        need not hand it to the attribution thread (epoch and monotonic seconds)."""
        return self.may_skip(now) and not self.rebuilds_due(monotonic_now)


def recheck_at(
    rows: Iterable[PendingNode],
    settings: Settings,
    now_ns: int,
    owns: Callable[[str, str], bool],
    drained_ns: int | None = None,
) -> float:
    """When one of the owned nodes, none due now, can come due without new activity: the next
    window end on the wall clock, or a node's idle flush (``IDLE_FLUSH_S`` after its newest
    activity) when that closes a window that has already ended (a live node's newest scrape lies
    in the current window: its idle flush closes nothing before the window's end)."""
    w = settings.window_seconds
    ended = floor_seconds(now_ns / 1e9, w)
    at = ended + w
    for r in rows:
        if (
            owns(r.cluster, r.node)
            and not idle(r, now_ns, drained_ns)
            and floor_seconds(r.max_time.timestamp(), w) < ended
        ):
            at = min(at, r.last_seq / 1e9 + IDLE_FLUSH_S)
    return at
