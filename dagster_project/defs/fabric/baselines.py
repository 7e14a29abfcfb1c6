"""Fabric health from nccl-tests runs (pure): each node set's bus bandwidth against its baseline.

A node set is the sorted, de-duplicated host list of a run. Per day, cluster, collective and node
set: the mean ``avg_busbw_gbps`` of the day's passing runs, compared with the baseline — the median
of the passing runs of the same node set in the look-back window before the day, or, with fewer
than ``min_runs`` of those, the median of all passing runs of the same collective and host count in
the cluster. A node set whose bandwidth is below ``(1 - tolerance) × baseline`` is flagged, and so
are its nodes.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Run:
    cluster: str
    collective: str
    run_id: str
    time: datetime
    hosts: tuple[str, ...]
    busbw: float | None
    ok: bool

    @property
    def node_set(self) -> str:
        return ",".join(sorted(set(self.hosts)))

    @property
    def good(self) -> bool:
        return self.ok and self.busbw is not None


@dataclass(frozen=True)
class FabricRow:
    cluster: str
    collective: str
    node_set: str
    hosts: list[str]
    runs: int
    failed_runs: int
    avg_busbw_gbps: float | None
    baseline_gbps: float | None
    baseline_runs: int
    baseline_scope: str  # node_set | cluster | none
    ratio: float | None
    below_baseline: bool


def _baseline(history: list[Run], probe: Run, min_runs: int) -> tuple[float | None, int, str]:
    same_set = [
        r.busbw
        for r in history
        if r.good and r.cluster == probe.cluster and r.collective == probe.collective and r.node_set == probe.node_set
    ]
    if len(same_set) >= min_runs:
        return statistics.median(same_set), len(same_set), "node_set"  # type: ignore[type-var]
    size = len(set(probe.hosts))
    peers = [
        r.busbw
        for r in history
        if r.good and r.cluster == probe.cluster and r.collective == probe.collective and len(set(r.hosts)) == size
    ]
    if len(peers) >= min_runs:
        return statistics.median(peers), len(peers), "cluster"  # type: ignore[type-var]
    return None, 0, "none"


def health(day_runs: list[Run], history: list[Run], tolerance: float = 0.10, min_runs: int = 3) -> list[FabricRow]:
    """One row per (cluster, collective, node set) run on the day; ``history`` are earlier runs."""
    groups: dict[tuple[str, str, str], list[Run]] = defaultdict(list)
    for r in day_runs:
        groups[(r.cluster, r.collective, r.node_set)].append(r)
    out = []
    for (cluster, collective, node_set), runs in sorted(groups.items()):
        good = [r.busbw for r in runs if r.good]
        avg = sum(good) / len(good) if good else None  # type: ignore[arg-type]
        base, n, scope = _baseline(history, runs[0], min_runs)
        ratio = avg / base if avg is not None and base else None
        out.append(
            FabricRow(
                cluster,
                collective,
                node_set,
                node_set.split(","),
                len(runs),
                sum(1 for r in runs if not r.ok),
                avg,
                base,
                n,
                scope,
                ratio,
                ratio is not None and ratio < 1.0 - tolerance,
            )
        )
    return out


def flagged_nodes(rows: list[FabricRow]) -> list[str]:
    """Nodes of the node sets below their baseline."""
    return sorted({h for r in rows if r.below_baseline for h in r.hosts})
