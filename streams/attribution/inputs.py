"""What one attribution step reads for a group of nodes, and the rules applied on the way in.

The warehouse (``warehouse.AttributionWarehouse``) only reads rows; here they become attribution inputs:
stored placement snapshots validated against today's contract (a rejected one names its node, which
is then quarantined), an attempt without an end ended where a later attempt of its job started
(``attempts.end_superseded``), and each node's samples from its own look-back on.

Look-back: a window's facts depend on samples before it only through sample-and-hold (a sample holds
at most ``HOLD_INTERVALS`` scrape intervals), the energy counter's rate over at most
``HOLD_INTERVALS`` gaps before a held sample (each gap at most the hold), and the GPU state a fatal
or clearing XID set — which the inventory gives for everything before the loaded samples. So
``LOOKBACK_INTERVALS`` scrape intervals of look-back give the same facts as any longer one. A node's
interval is not known before its samples are read: a step uses the interval the node's previous
step saw (``StepMemory``), else the longest look-back (``LOOKBACK_S``), and reads a node again with
``LOOKBACK_S`` when its loaded samples state a longer interval than the one it assumed.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import orjson

from pipelines.events import AllocationData, one_line
from streams.attribution.attempts import end_superseded, next_starts
from streams.attribution.core import HOLD_INTERVALS
from streams.attribution.node_range import SAMPLE_COLUMNS, SampleColumns
from streams.attribution.warehouse import AttributionWarehouse

LOOKBACK_S = 900.0  # the longest look-back: a node whose scrape interval is not known yet
LOOKBACK_INTERVALS = 4 * HOLD_INTERVALS  # a held sample, and three counter gaps of at most the hold before it
_INTERVAL = SAMPLE_COLUMNS.index("interval_s")

NodeKey = tuple[str, str]


@dataclass
class StepMemory:
    """What a worker carries from one step to the next: each node's longest scrape interval seen."""

    intervals: dict[NodeKey, float] = field(default_factory=dict)

    def lookback(self, key: NodeKey) -> float:
        interval = self.intervals.get(key)
        return LOOKBACK_S if interval is None else min(LOOKBACK_S, LOOKBACK_INTERVALS * interval)

    def saw(self, key: NodeKey, samples: SampleColumns) -> None:
        interval = stated_interval(samples)
        if interval is None:
            self.intervals.pop(key, None)
        else:
            self.intervals[key] = interval


def stated_interval(samples: SampleColumns) -> float | None:
    """The longest scrape interval the samples state; None when one states none (then the interval
    is estimated from the gaps, and only the longest look-back is safe)."""
    if not len(samples):
        return None
    values = samples.columns[_INTERVAL]
    if any(not v for v in values):
        return None
    return float(max(values))


def enough(samples: SampleColumns, lookback: float) -> bool:
    """Whether ``lookback`` covers what the samples' own intervals need (see the module docstring)."""
    if lookback >= LOOKBACK_S:
        return True
    interval = stated_interval(samples)
    return interval is not None and LOOKBACK_INTERVALS * interval <= lookback


def between(samples: SampleColumns | None, start: float, end: float) -> SampleColumns:
    """The samples with start <= time < end (columns are in time order)."""
    if samples is None:
        return SampleColumns(())
    times = samples.columns[0]
    lo, hi = bisect.bisect_left(times, start), bisect.bisect_left(times, end)
    if lo == 0 and hi == len(times):
        return samples
    return SampleColumns(tuple(c[lo:hi] for c in samples.columns))


def placements(
    wh: AttributionWarehouse,
    cluster: str,
    nodes: Sequence[str],
    start: datetime,
    end: datetime,
    rejected: dict[str, str] | None = None,
) -> dict[str, list[AllocationData]]:
    """The latest snapshot of every placement on ``nodes`` that overlaps [start, end), per node;
    one without an end record ends where a later attempt of its job started.

    A stored snapshot that today's contract rejects (written by an older version, or straight
    into the table) is left out and its node named in ``rejected`` with the reason.
    """
    loaded: list[tuple[str, AllocationData]] = []
    for row in wh.placement_rows(cluster, nodes, start, end):
        try:
            loaded.append((row.node, AllocationData.model_validate(orjson.loads(row.payload))))
        except ValueError as exc:
            if rejected is not None:
                rejected.setdefault(row.node, f"stored allocation rejected: {one_line(exc)}")
    open_jobs = sorted({p.job_id for _, p in loaded if p.end_time is None})
    later = next_starts(wh.attempt_starts(cluster, open_jobs))
    out: dict[str, list[AllocationData]] = {}
    for node, p in loaded:
        p = end_superseded(p, later.get((p.scheduler, p.job_id, p.attempt)))
        if p.end_time is None or p.end_time > start:
            out.setdefault(node, []).append(p)
    return out
