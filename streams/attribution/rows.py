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

import numpy as np
import pyarrow as pa

from pipelines.times import from_epoch
from streams.attribution import fact_table
from streams.attribution.core import Conflict

Row = dict[str, Any]


@dataclass
class NodeFacts:
    """What one attribution step wrote for one node: facts of ``windows`` and the progress after them."""

    cluster: str
    node: str
    windows: Sequence[datetime]
    facts: fact_table.FactColumns | Sequence[dict[str, Any]]  # or the rows as dicts
    closed_until: datetime
    processed_seq: int
    # per window start: the node's physical GPUs and the claims beyond them
    inventory: dict[datetime, tuple[float, list[Conflict]]] | None = None
    window_seconds: int = 0


@dataclass
class FactRows:
    """The rows of one step, per table."""

    facts: pa.Table = field(default_factory=lambda: fact_table.EMPTY)  # with the version column
    windows: list[Row] = field(default_factory=list)
    conflicts: list[Row] = field(default_factory=list)
    progress: list[Row] = field(default_factory=list)


def fact_rows(batch: Sequence[NodeFacts], version: int) -> FactRows:
    """Every row of ``batch`` with ``version``: every fact row is capacity (a node-level slot ""
    holds exactly what it allocates), so a window's capacity is the sum of its facts."""
    out = FactRows()
    parts: list[fact_table.FactColumns] = []
    for item in batch:
        facts = item.facts if isinstance(item.facts, fact_table.FactColumns) else fact_table.from_dicts(item.facts)
        parts.append(facts)
        inventory = item.inventory or {}
        for w, capacity, rows in _per_window(item.windows, facts):
            physical, found = inventory.get(w, (0.0, []))
            out.windows.append(_window_row(item, w, version, capacity, rows, physical, found))
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
    out.facts = fact_table.table(parts, version)
    return out


def _per_window(windows: Sequence[datetime], facts: fact_table.FactColumns) -> list[tuple[datetime, float, int]]:
    """Each window's capacity (its facts' GPU-seconds, summed in row order) and fact rows, in time
    order: the node's windows and any other window a fact names."""
    at = fact_table.micros(np.array([w.timestamp() for w in windows], dtype=np.float64))
    keys, inverse = np.unique(np.concatenate([at, facts.columns["window_start"]]), return_inverse=True)
    rows_of = inverse[len(at) :]
    capacity = np.bincount(rows_of, weights=facts.columns["gpu_seconds"], minlength=keys.size)
    counts = np.bincount(rows_of, minlength=keys.size)
    starts = [from_epoch(k / 1e6) for k in keys.tolist()]
    return list(zip(starts, capacity.tolist(), counts.tolist(), strict=True))


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
