"""Fact rows of the vectorised attribution, from columns to the warehouse's dicts.

The rows come out in the core's order (per window: each GPU in the window's GPU order with its
allocated rows in placement order, then its unavailable row; the unallocated rows; the node-level
slot), as the same dicts with the same fact ids as ``compute.fact_dict``. Per window its start
(datetime and the ``repr`` in the fact id) is built once, and per owner its dimensions.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import numpy as np

from streams.attribution.core import NODE_SLOT, Owner
from streams.attribution.vector_sweep import ALLOCATED, UNAVAILABLE, Rows
from streams.attribution.vector_view import NodeView

KINDS = {ALLOCATED: "allocated", UNAVAILABLE: "unavailable"}
_NO_OWNER = ("", "", 0, "", "", "", "", "", "", "", "")


def facts_of(cluster: str, node: str, window_s: int, view: NodeView, rows: Rows) -> list[dict[str, object]]:
    """The rows as ``compute.fact_dict`` dicts, in the core's order."""
    if not rows.chunks:
        return []
    order = np.lexsort((rows.column("sub"), rows.column("rank"), rows.column("section"), rows.column("window")))
    cols = [
        rows.column(name)[order].tolist()
        for name in ("window", "gpu", "model", "kind", "owner", "gpu_seconds", "busy", "unobserved", "energy")
    ]
    starts = view.win.starts.tolist()
    when = [datetime.fromtimestamp(w0, tz=UTC) for w0 in starts]
    prefix = [f"fact\x1f{cluster}\x1f{node}\x1f{float(w0)!r}\x1f" for w0 in starts]
    owners = {c.rank: _owner(c.owner) for c in view.claims}
    uuids = [*view.uuids, NODE_SLOT]  # gpu -1: the node-level slot
    models = view.models
    out: list[dict[str, object]] = []
    for k, g, m, kind_code, o, gpu_s, busy, unobserved, energy in zip(*cols, strict=True):
        uuid = uuids[g]
        kind = KINDS.get(kind_code, "unallocated")
        scheduler, job_id, attempt, logical, ns, account, user, queue, wk, team, model = (
            owners[o] if o >= 0 else _NO_OWNER
        )
        text = f"{prefix[k]}{uuid}\x1f{kind}\x1f{scheduler}\x1f{job_id}\x1f{attempt}"
        out.append(
            {
                "fact_id": hashlib.sha256(text.encode()).hexdigest()[:32],
                "cluster": cluster,
                "window_start": when[k],
                "window_seconds": window_s,
                "node": node,
                "gpu_uuid": uuid,
                "slot": uuid,
                "gpu_model": models[m],
                "kind": kind,
                "scheduler": scheduler,
                "job_id": job_id,
                "logical_job": logical,
                "attempt": attempt,
                "namespace": ns,
                "account": account,
                "user": user,
                "queue": queue,
                "workload_kind": wk,
                "team_label": team,
                "model": model,
                "gpu_seconds": gpu_s,
                "busy_seconds": busy,
                "unobserved_seconds": unobserved,
                "energy_joules": energy,
            }
        )
    return out


def _owner(o: Owner) -> tuple[object, ...]:
    return (
        o.scheduler,
        o.job_id,
        o.attempt,
        o.logical_job,
        o.namespace,
        o.account,
        o.user,
        o.queue,
        o.workload_kind,
        o.team_label,
        o.model,
    )
