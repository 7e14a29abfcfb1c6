"""Fact rows of the vectorised attribution, from its arrays to ``fact_table.FactColumns``.

The rows come out in the core's order (per window: each GPU in the window's GPU order with its
allocated rows in placement order, then its unavailable row; the unallocated rows; the node-level
slot), with the same values and fact ids as ``node_range.fact_dict``. Every column is taken from
a short list (the windows, the GPUs, the models, the kinds, the owners) by index; only the fact
ids are built row by row, from each window's and each owner's part of the hashed text.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from streams.attribution import fact_table
from streams.attribution.core import NODE_SLOT, Owner
from streams.attribution.vector_sweep import ALLOCATED, UNALLOCATED, UNAVAILABLE, Rows
from streams.attribution.vector_view import NodeView

KIND_NAMES = {ALLOCATED: "allocated", UNAVAILABLE: "unavailable", UNALLOCATED: "unallocated"}
# the owner's columns of a fact row, named as ``core.Owner``'s fields
OWNER_KEYS = fact_table.FACT_KEYS[fact_table.FACT_KEYS.index("scheduler") : fact_table.FACT_KEYS.index("model") + 1]
NO_OWNER = ("", "", "", 0, "", "", "", "", "", "", "")


def columns_of(cluster: str, node: str, window_s: int, view: NodeView, rows: Rows) -> fact_table.FactColumns:
    """The rows as ``fact_table.FactColumns``, in the core's order."""
    if not rows.chunks:
        return fact_table.EMPTY
    order = np.lexsort((rows.column("sub"), rows.column("rank"), rows.column("section"), rows.column("window")))
    window = rows.column("window")[order].astype(np.int64)
    gpu = rows.column("gpu")[order].astype(np.int64)
    slot = np.where(gpu < 0, len(view.uuids), gpu)  # the node-level slot after the GPUs
    code = rows.column("kind")[order].astype(np.int64)
    kind = np.where((code == ALLOCATED) | (code == UNAVAILABLE), code, UNALLOCATED)
    # owners: each claim's rank → its place in ``owners``, the rows of no claim (-1) → the last
    owners: list[Owner | None] = [c.owner for c in view.claims]
    place = {c.rank: i for i, c in enumerate(view.claims)}
    owner = np.array([place.get(r, len(owners)) for r in rows.column("owner")[order].tolist()], dtype=np.int64)
    owners.append(None)
    values = [NO_OWNER if o is None else tuple(getattr(o, k) for k in OWNER_KEYS) for o in owners]
    starts = view.win.starts
    slots = [*view.uuids, NODE_SLOT]
    kinds = [KIND_NAMES[k] for k in (ALLOCATED, UNAVAILABLE, UNALLOCATED)]
    prefix = [fact_table.window_prefix(cluster, node, w0) for w0 in starts.tolist()]
    middle = [[f"{s}\x1f{k}" for k in kinds] for s in slots]
    suffix = [fact_table.owner_suffix(v[0], v[1], v[3]) for v in values]
    sha = hashlib.sha256  # ``fact_table.hashed``, inlined: it runs once per row
    ids = [
        sha(f"{prefix[w]}{middle[s][k]}{suffix[o]}".encode()).hexdigest()[:32]
        for w, s, k, o in zip(window.tolist(), slot.tolist(), kind.tolist(), owner.tolist(), strict=True)
    ]
    n = order.size
    slot_text = np.array(slots, dtype=object)[slot]
    columns: dict[str, np.ndarray[Any, Any]] = {
        "fact_id": np.array(ids, dtype=object),
        "cluster": np.full(n, cluster, dtype=object),
        "window_start": fact_table.micros(starts)[window],
        "window_seconds": np.full(n, window_s, dtype=np.uint32),
        "node": np.full(n, node, dtype=object),
        "gpu_uuid": slot_text,
        "slot": slot_text,
        "gpu_model": np.array(list(view.models), dtype=object)[rows.column("model")[order].astype(np.int64)],
        "kind": np.array(kinds, dtype=object)[kind],
    }
    by_owner = np.array(values, dtype=object)[owner]  # one row per fact, the owner's columns
    for i, name in enumerate(OWNER_KEYS):
        columns[name] = by_owner[:, i].astype(fact_table.dtype(name))
    for name, source in (("gpu_seconds", "gpu_seconds"), ("busy_seconds", "busy"),
                         ("unobserved_seconds", "unobserved"), ("energy_joules", "energy")):  # fmt: skip
        columns[name] = rows.column(source)[order].astype(np.float64)
    return fact_table.FactColumns(columns)
