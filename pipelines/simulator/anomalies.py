"""Deliberate imperfections of the metrics: one scrape gap, where malformed samples go, and a
storage stall.

**Scrape gap.** One node misses ``G`` consecutive scrapes (``G`` > 3, so part of it is beyond
sample-and-hold and unobserved). Preferably ``G`` is up to 20, placed where every GPU of that node
is held by some allocation from two minutes before the gap until two minutes after the hold
limit, so the node's GPUs stay "present" (an allocation names them) in every window the gap
touches and capacity is unaffected. Without such a stretch ``G`` is 4 (two intervals beyond the
hold limit), where most of the node's GPUs are held: every 60 s window then still has a sample
within three intervals before it, so presence is unaffected too.

**Malformed samples.** Two dcgm samples are replaced by out-of-range values (a ratio of 1.7, a
percent of 250) on whole GPUs that nobody holds on the scrape before, at and after, with XID 0,
on nodes that publish ``DCGM_FI_PROF_*`` — so however a reader treats the bad value (drop the
field, drop the sample, fall back to the other utilisation field) the ground truth is unchanged.

**Storage stall.** For 20 minutes (or an eighth of a short window) from a third of the window, one
Kubernetes node's local storage runs at its ceiling — the highest throughput the node reaches at
all, at least 10 GB/s — while every GPU on it is starved: its utilisation drops to a tenth. The
node is the Kubernetes node whose GPUs are held longest over that stretch; the stretch starts and
ends on the scrape grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipelines.simulator.config import HOLD_INTERVALS, SimConfig
from pipelines.simulator.dcgm_view import Metrics
from pipelines.simulator.intervals import intersect, union
from pipelines.simulator.model.cluster import Cluster
from pipelines.simulator.model.jobs import SimState

MARGIN_S = 120
SHORT_GAP = 4
STALL_STEPS = 40
STARVED = 0.1  # utilisation kept by a GPU whose input pipeline waits on storage
STALL_MIN_RATE = 10e9  # bytes/s


@dataclass(frozen=True)
class StorageStall:
    node: str
    k1: int  # first scrape step of the stall
    k2: int  # first scrape step after it

    def span(self, step: int) -> tuple[int, int]:
        return self.k1 * step, self.k2 * step


def plan_storage_stall(cfg: SimConfig, cluster: Cluster, state: SimState) -> StorageStall | None:
    """Where and when the storage stall happens (see the module docstring)."""
    length = min(STALL_STEPS, max(cfg.steps // 8, 2))
    k1 = cfg.steps // 3
    k2 = min(k1 + length, cfg.steps)
    a, b = k1 * cfg.scrape_interval_s, k2 * cfg.scrape_interval_s
    best: tuple[int, str] | None = None
    for node in cluster.by_scheduler("kubernetes"):
        held = 0
        for attempt in state.attempts:
            end = attempt.end if attempt.end is not None else cfg.horizon
            overlap = max(min(end, b) - max(attempt.start, a), 0)
            held += overlap * sum(1 for s in attempt.slots if s.gpu.node == node.name)
        if best is None or held > best[0]:
            best = (held, node.name)
    return StorageStall(best[1], k1, k2) if best is not None and k2 > k1 else None


def starve(m: Metrics, stall: StorageStall | None) -> None:
    """Drop the utilisation of every GPU on the stalled node during the stall."""
    if stall is None:
        return
    for ent in m.entities.values():
        if ent.node.name == stall.node:
            ent.util[stall.k1 : stall.k2] *= STARVED


@dataclass(frozen=True)
class BadSample:
    entity: str
    metric: str
    step: int
    value: str


def _full_hold_gap(cfg: SimConfig, cluster: Cluster, state: SimState, length: int) -> tuple[str, int, int] | None:
    step, horizon = cfg.scrape_interval_s, cfg.horizon
    held: dict[str, list[tuple[int, int]]] = {}
    for attempt in state.attempts:
        for slot in attempt.slots:
            held.setdefault(slot.gpu.uuid, []).append((attempt.start, attempt.end or horizon))
    failed = {x.node for x in state.xids}
    ordered = cluster.by_scheduler("slurm") + cluster.by_scheduler("kubernetes")
    for node in (n for n in ordered if n.name not in failed):
        covered = [(0, horizon)]
        for gpu in node.gpus:
            covered = intersect(covered, union(held.get(gpu.uuid, [])))
        for a, b in covered:
            k1 = -(-(max(a, horizon // 6) + MARGIN_S) // step)
            k2 = k1 + length
            if (k2 + HOLD_INTERVALS) * step + MARGIN_S <= b and k2 + HOLD_INTERVALS < cfg.steps:
                return node.name, k1, k2
    return None


def _short_gap(cfg: SimConfig, cluster: Cluster, state: SimState, m: Metrics) -> tuple[str, int, int] | None:
    """Four missing scrapes where most GPUs are held (every window still has a sample near it),
    away from fatal-XID intervals."""
    step = cfg.scrape_interval_s
    best: tuple[int, str, int] | None = None
    lo, hi = max(cfg.steps // 6, 1), cfg.steps - SHORT_GAP - HOLD_INTERVALS - 1
    for node in cluster.by_scheduler("slurm") + cluster.by_scheduler("kubernetes"):
        if hi <= lo:
            continue
        busy = sum((m.entities[g.uuid].holder[lo:hi] > 0).astype(int) for g in node.gpus if g.layout == "whole")
        busy = np.asarray(busy, dtype=int) if not np.isscalar(busy) else np.zeros(hi - lo, int)
        for x in (x for x in state.xids if x.node == node.name):
            busy[max(x.at // step - lo - 10, 0) : max(x.repaired // step - lo + 10, 0)] = -1
        k = int(np.argmax(busy))
        if busy[k] >= 0 and (best is None or busy[k] > best[0]):
            best = (int(busy[k]), node.name, lo + k)
    return (best[1], best[2], best[2] + SHORT_GAP) if best else None


def choose_gap(cfg: SimConfig, cluster: Cluster, state: SimState, m: Metrics) -> None:
    """Remove consecutive scrapes of one node (sets ``m.gap``): ``G`` = up to 20 where all of its
    GPUs are held throughout, else 4 where most are held."""
    length = min(20, max(HOLD_INTERVALS + 2, cfg.steps // 12))
    gap = _full_hold_gap(cfg, cluster, state, length) or _short_gap(cfg, cluster, state, m)
    if gap is not None:
        node, k1, k2 = gap
        m.sampled[node][k1:k2] = False
        m.gap = gap


def bad_samples(m: Metrics) -> list[BadSample]:
    """Where the two out-of-range dcgm values go (see the module docstring)."""
    out: list[BadSample] = []
    wanted = [("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "1.7"), ("DCGM_FI_DEV_GPU_UTIL", "250")]
    gap_node = m.gap[0] if m.gap else None
    used: set[tuple[str, int]] = set()
    for ent in m.entities.values():
        node = ent.node
        if ent.gpu.layout != "whole" or not node.has_prof or node.name == gap_node:
            continue
        xid = m.xid[ent.gpu.uuid]
        for k in range(max(m.steps // 3, 1), m.steps - 2):
            window = slice(k - 1, k + 2)
            if (node.name, k // 10) in used or not (ent.holder[window] == 0).all():
                continue
            if (ent.util[window] == 0).all() and (xid[window] == 0).all():
                metric, value = wanted[len(out)]
                out.append(BadSample(ent.key, metric, k, value))
                used.add((node.name, k // 10))
                if len(out) == len(wanted):
                    return out
                break
    return out
