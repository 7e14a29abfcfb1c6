"""Vectorised attribution of one node over a whole range of windows (numpy), for the common case.

``compute.compute_range_full`` tries :func:`compute_range_vector` first; it returns None for a node
it does not cover, and that node goes through the scalar path (``core.attribute_window_full`` per
window), which stays the reference. Covered: whole-GPU samples (no MIG instance) with any gaps,
silences, late or repeated samples, fatal XIDs, power and energy counters; the node's inventory,
declared GPUs and drained/down states; placements bound by whole-GPU device ids (``GPU-<uuid>``,
no DRA claim, nothing left unbound) or by Slurm GPU indices that name the same GPU in every window
the placement runs in, none overlapping another on a GPU (no conflict), with the node's replicas
per GPU the same over the range. Everything else (MIG, time-sliced replicas, DRA,
ambiguous GPU indices, mapping labels, unbound GPUs, conflicts) falls back to the scalar path.
``tests/unit/test_attribution_vector.py`` checks that both paths give the same facts, to the bit.

Modules: ``vector_series`` (samples as arrays, the core's integrals over many intervals),
``vector_view`` (which GPUs each window has, in what order), ``vector_sweep`` (a GPU's windows
swept at once), ``vector_facts`` (the facts table and its fact ids).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipelines.events import AllocationData
from streams.attribution import fact_table
from streams.attribution.core import Conflict, Owner
from streams.attribution.node_range import NodeInputs, RangeResult, SampleColumns
from streams.attribution.resolve import SlotMeta, to_placement
from streams.attribution.vector_facts import columns_of
from streams.attribution.vector_series import NodeSeries, build_series, has_mig
from streams.attribution.vector_sweep import Rows, attribute, node_slot_rows
from streams.attribution.vector_view import Claim, NodeView, window_edges


def compute_range_vector(
    cluster: str,
    node: str,
    start: float,
    end: float,
    window_s: int,
    samples: SampleColumns,
    placements: Sequence[AllocationData],
    inputs: NodeInputs,
) -> RangeResult | None:
    """What ``compute_range_full`` returns for [start, end) on ``node``, or None when the node's
    input is not covered (the caller then takes the scalar path)."""
    columns: tuple[Sequence[Any], ...] = samples.columns
    if len(samples) and has_mig(columns[2]):
        return None
    win = window_edges(start, end, window_s)
    if not win.count:
        return RangeResult(fact_table.EMPTY, {})
    last = float(win.ends[-1])
    spans = inputs.replicas(start, last)
    if len(spans) != 1:
        return None
    series = build_series(columns) if len(samples) else None
    gpu_of_index = _gpu_indices(series, inputs)
    claims = claims_of(placements, start, last, spans[0][2], gpu_of_index)
    if claims is None:
        return None
    view = NodeView(win, series, claims, inputs)
    if not all(view.named_by_samples_or_inventory(c) for c in claims if c.by_index):
        return None  # a GPU index the window's GPUs do not map: bound otherwise there
    rows = Rows()
    attribute(view, rows)
    physical = node_slot_rows(view, rows)
    windows: dict[float, tuple[float, list[Conflict]]] = {
        w0: (p, []) for w0, p in zip(win.starts.tolist(), physical.tolist(), strict=True)
    }  # no conflict: the cover has none
    return RangeResult(columns_of(cluster, node, window_s, view, rows), windows)


def _gpu_indices(series: NodeSeries | None, inputs: NodeInputs) -> dict[str, SlotMeta] | None:
    """GPU index → the GPU, when every GPU the samples and the inventory know has one index and
    every index one GPU (what Slurm GPU indices bind to in every window); else None."""
    index_of: dict[str, int | None] = {}
    sampled = zip(series.uuids, series.index, strict=True) if series is not None else ()
    for uuid, index in [*sampled, *((g.uuid, g.index) for g in inputs.inventory)]:
        if index_of.setdefault(uuid, index) != index:
            return None
    out: dict[str, SlotMeta] = {}
    seen: set[int] = set()
    for uuid, index in index_of.items():
        if index is not None:
            if index in seen:
                return None
            seen.add(index)
            out[uuid] = SlotMeta(uuid, index=index)
    return out


def claims_of(
    placements: Sequence[AllocationData],
    start: float,
    end: float,
    replicas: int | None,
    gpu_of_index: dict[str, SlotMeta] | None = None,
) -> list[Claim] | None:
    """The whole-GPU claims of the placements running in [start, end), ranked in the core's order,
    or None when one of them is not covered."""
    found: list[tuple[tuple[str, str, int, float, str], Owner, list[str], float, float | None, bool]] = []
    indices = {m.index for m in gpu_of_index.values()} if gpu_of_index is not None else set()
    for p in placements:
        if p.start_time is None:
            continue
        s, e = p.start_time.timestamp(), p.end_time.timestamp() if p.end_time is not None else None
        if not (s < end and (e is None or e > start)):
            continue
        by_index = not p.device_ids and bool(p.gpu_indices)
        if by_index and (gpu_of_index is None or any(i not in indices for i in p.gpu_indices)):
            return None
        if not s or not (p.device_ids or by_index) or p.claims or any(_partial(d) for d in p.device_ids):
            return None
        core = to_placement(p, s, e, gpu_of_index if by_index and gpu_of_index else {}, replicas)
        if core.unbound_gpus or not core.bindings or any(b.share != 1.0 or b.split for b in core.bindings):
            return None
        o = core.owner
        key = (o.scheduler, o.job_id, o.attempt, core.start, repr(core.bindings))
        found.append((key, o, [b.uuid for b in core.bindings], s, e, by_index))
    found.sort(key=lambda f: f[0])
    claims = [Claim(rank, o, u, s, e, ix) for rank, (_, o, uuids, s, e, ix) in enumerate(found) for u in uuids]
    return claims if _disjoint(claims, start, end) else None


def _partial(device: str) -> bool:
    """A device id naming less than a whole GPU (a replica, a MIG instance)."""
    return "::" in device or device.startswith("MIG-")


def _disjoint(claims: Sequence[Claim], start: float, end: float) -> bool:
    """No two claims on a GPU overlap in the range, and no job attempt claims a GPU twice."""
    by_gpu: dict[str, list[tuple[float, float]]] = {}
    seen: set[tuple[str, str, str, int]] = set()
    for c in claims:
        key = (c.uuid, c.owner.scheduler, c.owner.job_id, c.owner.attempt)
        if key in seen:
            return False
        seen.add(key)
        lo, hi = max(c.start, start), min(c.end if c.end is not None else end, end)
        if hi > lo:
            by_gpu.setdefault(c.uuid, []).append((lo, hi))
    for spans in by_gpu.values():
        spans.sort()
        if any(b[0] < a[1] for a, b in zip(spans, spans[1:], strict=False)):
            return False
    return True
