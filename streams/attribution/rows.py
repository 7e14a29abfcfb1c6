"""The rows one attribution step writes, built from its computed facts (pure).

Per node: its fact rows, one ``fact_windows`` row per window (the capacity the facts add up to,
the node's physical GPUs, the GPU-seconds claimed beyond them), one ``attribution_conflicts`` row
per GPU and window whose claims exceeded it, and the node's progress. Every row of one step carries
one version (``warehouse.AttributionWarehouse.write_fact_batch`` inserts them, one insert per table).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from streams.attribution.core import Conflict

Row = dict[str, Any]


@dataclass
class NodeFacts:
    """What one attribution step wrote for one node: facts of ``windows`` and the progress after them."""

    cluster: str
    node: str
    windows: Sequence[datetime]
    facts: list[dict[str, Any]]
    closed_until: datetime
    processed_seq: int
    # per window start: the node's physical GPUs and the claims beyond them
    inventory: dict[datetime, tuple[float, list[Conflict]]] | None = None
    window_seconds: int = 0


@dataclass
class FactRows:
    """The rows of one step, per table."""

    facts: list[Row] = field(default_factory=list)
    windows: list[Row] = field(default_factory=list)
    conflicts: list[Row] = field(default_factory=list)
    progress: list[Row] = field(default_factory=list)


def fact_rows(batch: Sequence[NodeFacts], version: int) -> FactRows:
    """Every row of ``batch`` with ``version``: every fact row is capacity (a node-level slot ""
    holds exactly what it allocates), so a window's capacity is the sum of its facts."""
    out = FactRows()
    for item in batch:
        per_window: dict[datetime, float] = {w: 0.0 for w in item.windows}
        counts: dict[datetime, int] = {w: 0 for w in item.windows}
        for f in item.facts:
            f["version"] = version
            per_window[f["window_start"]] = per_window.get(f["window_start"], 0.0) + float(f["gpu_seconds"])
            counts[f["window_start"]] = counts.get(f["window_start"], 0) + 1
        out.facts.extend(item.facts)
        inventory = item.inventory or {}
        for w in sorted(per_window):
            physical, found = inventory.get(w, (0.0, []))
            out.windows.append(_window_row(item, w, version, per_window[w], counts[w], physical, found))
            out.conflicts.extend(_conflict_row(item, w, version, c) for c in found)
        out.progress.append(
            {
                "cluster": item.cluster,
                "node": item.node,
                "closed_until": item.closed_until,
                "processed_seq": item.processed_seq,
                "version": version,
            }
        )
    return out


def _window_row(
    item: NodeFacts, w: datetime, version: int, capacity: float, rows: int, physical: float, found: list[Conflict]
) -> Row:
    return {
        "cluster": item.cluster,
        "node": item.node,
        "window_start": w,
        "version": version,
        "capacity_seconds": capacity,
        "rows": rows,
        "physical_gpus": physical,
        "window_seconds": item.window_seconds,
        "conflict_seconds": sum(c.claimed_seconds - c.capacity_seconds for c in found),
    }


def _conflict_row(item: NodeFacts, w: datetime, version: int, c: Conflict) -> Row:
    return {
        "cluster": item.cluster,
        "node": item.node,
        "window_start": w,
        "version": version,
        "gpu_uuid": c.gpu_uuid,
        "claimed_seconds": c.claimed_seconds,
        "capacity_seconds": c.capacity_seconds,
        "owners": list(c.owners),
    }
