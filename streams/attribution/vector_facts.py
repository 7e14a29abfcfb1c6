"""Fact rows of the vectorised attribution, from columns to the warehouse's dicts.

The rows come out in the core's order (per window: each GPU in the window's GPU order with its
allocated rows in placement order, then its unavailable row; the unallocated rows; the node-level
slot), as the same dicts with the same fact ids as ``compute.fact_dict``. Per window its start
(datetime and the ``repr`` in the fact id) is built once, and per owner a dict of the columns its
rows share, copied per row.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from pipelines.times import from_epoch
from streams.attribution.core import NODE_SLOT, Owner
from streams.attribution.vector_sweep import ALLOCATED, UNAVAILABLE, Rows
from streams.attribution.vector_view import NodeView

KINDS = {ALLOCATED: "allocated", UNAVAILABLE: "unavailable"}
FACT_KEYS = ("fact_id", "cluster", "window_start", "window_seconds", "node", "gpu_uuid", "slot", "gpu_model", "kind",
             "scheduler", "job_id", "logical_job", "attempt", "namespace", "account", "user", "queue",
             "workload_kind", "team_label", "model", "gpu_seconds", "busy_seconds", "unobserved_seconds",
             "energy_joules")  # fmt: skip
OWNER_KEYS = ("scheduler", "job_id", "logical_job", "attempt", "namespace", "account", "user", "queue",
              "workload_kind", "team_label", "model")  # fmt: skip


def facts_of(cluster: str, node: str, window_s: int, view: NodeView, rows: Rows) -> list[dict[str, Any]]:
    """The rows as ``compute.fact_dict`` dicts, in the core's order."""
    if not rows.chunks:
        return []
    order = np.lexsort((rows.column("sub"), rows.column("rank"), rows.column("section"), rows.column("window")))
    cols = [
        rows.column(name)[order].tolist()
        for name in ("window", "gpu", "model", "kind", "owner", "gpu_seconds", "busy", "unobserved", "energy")
    ]
    starts = view.win.starts.tolist()
    when = [from_epoch(w0) for w0 in starts]
    prefix = [f"fact\x1f{cluster}\x1f{node}\x1f{float(w0)!r}\x1f" for w0 in starts]
    bases = {c.rank: _base(cluster, node, window_s, c.owner) for c in view.claims}
    bases[-1] = _base(cluster, node, window_s, None)
    uuids = [*view.uuids, NODE_SLOT]  # gpu -1: the node-level slot
    models = view.models
    out: list[dict[str, Any]] = []
    for k, g, m, kind_code, o, gpu_s, busy, unobserved, energy in zip(*cols, strict=True):
        uuid = uuids[g]
        kind = KINDS.get(kind_code, "unallocated")
        row = bases[o].copy()  # the owner's columns; then what differs per row
        row["fact_id"] = hashlib.sha256(
            f"{prefix[k]}{uuid}\x1f{kind}\x1f{row['scheduler']}\x1f{row['job_id']}\x1f{row['attempt']}".encode()
        ).hexdigest()[:32]
        row["window_start"] = when[k]
        row["gpu_uuid"] = row["slot"] = uuid
        row["gpu_model"] = models[m]
        row["kind"] = kind
        row["gpu_seconds"] = gpu_s
        row["busy_seconds"] = busy
        row["unobserved_seconds"] = unobserved
        row["energy_joules"] = energy
        out.append(row)
    return out


def _base(cluster: str, node: str, window_s: int, o: Owner | None) -> dict[str, Any]:
    """A fact dict with the columns one owner's rows share, in ``compute.fact_dict``'s key order."""
    row: dict[str, Any] = dict.fromkeys(FACT_KEYS)
    row.update(cluster=cluster, window_seconds=window_s, node=node)
    if o is None:
        row.update(dict(zip(OWNER_KEYS, ("", "", "", 0, "", "", "", "", "", "", ""), strict=True)))
    else:
        values = (o.scheduler, o.job_id, o.logical_job, o.attempt, o.namespace, o.account, o.user, o.queue,
                  o.workload_kind, o.team_label, o.model)  # fmt: skip
        row.update(dict(zip(OWNER_KEYS, values, strict=True)))
    return row
