"""Deliberate imperfections of the metrics: one scrape gap, and where malformed samples go.

**Scrape gap.** One node misses ``G`` consecutive scrapes (``G`` > 3, so part of it is beyond
sample-and-hold and unobserved). It is placed where every GPU of that node is held by some
allocation from two minutes before the gap until two minutes after the hold limit, so the node's
GPUs stay "present" (an allocation names them) in every window the gap touches, and capacity is
unaffected. Without such a stretch there is no gap (``truth.scrape_gap`` is ``null``).

**Malformed samples.** Two dcgm samples are replaced by out-of-range values (a ratio of 1.7, a
percent of 250) on whole GPUs that nobody holds on the scrape before, at and after, with XID 0,
on nodes that publish ``DCGM_FI_PROF_*`` — so however a reader treats the bad value (drop the
field, drop the sample, fall back to the other utilisation field) the ground truth is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.simulator.config import HOLD_INTERVALS, SimConfig
from pipelines.simulator.intervals import intersect, union
from pipelines.simulator.metrics import Metrics
from pipelines.simulator.model.cluster import Cluster
from pipelines.simulator.scheduler import SimState

MARGIN_S = 120


@dataclass(frozen=True)
class BadSample:
    entity: str
    metric: str
    step: int
    value: str


def choose_gap(cfg: SimConfig, cluster: Cluster, state: SimState, m: Metrics) -> None:
    """Find a fully-held stretch on one node and remove ``G`` scrapes of it (sets ``m.gap``)."""
    step, horizon = cfg.scrape_interval_s, cfg.horizon
    length = min(20, max(HOLD_INTERVALS + 2, cfg.steps // 12))
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
                m.sampled[node.name][k1:k2] = False
                m.gap = (node.name, k1, k2)
                return


def bad_samples(m: Metrics) -> list[BadSample]:
    """Where the two out-of-range dcgm values go (see the module docstring)."""
    out: list[BadSample] = []
    wanted = [("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "1.7"), ("DCGM_FI_DEV_GPU_UTIL", "250")]
    gap_node = m.gap[0] if m.gap else None
    used_nodes: set[str] = set()
    for ent in m.entities.values():
        if len(out) == len(wanted):
            break
        node = ent.node
        if ent.gpu.layout != "whole" or not node.has_prof or node.name in used_nodes or node.name == gap_node:
            continue
        xid = m.xid[ent.gpu.uuid]
        for k in range(max(m.steps // 3, 1), m.steps - 2):
            window = slice(k - 1, k + 2)
            if (ent.holder[window] == 0).all() and (ent.util[window] == 0).all() and (xid[window] == 0).all():
                metric, value = wanted[len(out)]
                out.append(BadSample(ent.key, metric, k, value))
                used_nodes.add(node.name)
                break
    return out
