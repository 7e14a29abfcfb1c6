"""One GPU's windows swept at once, and the node-level slot of every window (numpy).

The core (``core._gpu_segments``) cuts each window of a GPU at its claims' and unavailable spans'
edges; here the whole range is cut at the union of those edges and of the window edges, which is
the same set of cuts window by window. A segment is claimed (by at most one claim: the vectorised
path covers no conflict), unavailable, or free; the sums over segments and over sample pieces run
in the core's order, so every value is the core's to the bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from streams.attribution.core import EPSILON_S
from streams.attribution.vector_series import Floats, energy_integrals, held_integrals, sums
from streams.attribution.vector_view import Claim, Ints, NodeView

ALLOCATED, UNAVAILABLE, UNALLOCATED = 0, 1, 2
LAST = 1 << 40  # after every claim's rank: a GPU's unavailable row follows its allocated rows


@dataclass
class Rows:
    """Fact rows as columns (chunks concatenated at the end); ``gpu`` -1 is the node-level slot."""

    chunks: dict[str, list[np.ndarray]] = field(default_factory=dict)

    def add(self, **cols: np.ndarray | int | float) -> None:
        size = np.size(cols["window"])
        for name, value in cols.items():
            arr = np.broadcast_to(np.asarray(value), (size,))
            self.chunks.setdefault(name, []).append(arr)

    def column(self, name: str) -> np.ndarray:
        return np.concatenate(self.chunks[name]) if name in self.chunks else np.zeros(0)


def _cover(starts: Floats, ends: Floats, t0: Floats, t1: Floats) -> tuple[Ints, np.ndarray]:
    """For each segment, the interval (sorted by start, disjoint) covering it, and whether one does."""
    if not starts.size:
        return np.zeros(t0.size, dtype=np.int64), np.zeros(t0.size, dtype=bool)
    j = np.searchsorted(starts, t0, "right") - 1
    jj = np.maximum(j, 0)
    return jj, (j >= 0) & (ends[jj] >= t1)


def attribute_gpu(view: NodeView, u: int, rows: Rows) -> None:
    """Every fact row of GPU ``u`` in every window it is present in."""
    win, uuid = view.win, view.uuids[u]
    lo_r, hi_r = float(win.starts[0]), float(win.ends[-1])
    claims = [c for c in view.claims if c.uuid == uuid]
    cs = np.array([max(c.start, lo_r) for c in claims])
    ce = np.array([min(c.end if c.end is not None else hi_r, hi_r) for c in claims])
    edges = [x for s, e in view.down_edges[u] if s < hi_r and e > lo_r for x in (max(s, lo_r), min(e, hi_r))]
    ds, de = np.array([d[0] for d in view.down[u]]), np.array([d[1] for d in view.down[u]])
    real = ce > cs
    cuts = np.unique(np.concatenate([win.starts, win.ends[-1:], cs[real], ce[real], np.array(edges)]))
    t0, t1 = cuts[:-1], cuts[1:]
    k = np.searchsorted(win.starts, t0, "right") - 1
    keep = view.present[u, k]
    t0, t1, k = t0[keep], t1[keep], k[keep]
    dt = t1 - t0
    by_start = np.flatnonzero(real)[np.argsort(cs[real], kind="stable")]
    j, claimed = _cover(cs[by_start], ce[by_start], t0, t1)
    _, down_now = _cover(ds, de, t0, t1)
    series = view.series.get(uuid)
    joules = energy_integrals(series, t0, t1, win.ends[k])
    w = win.count
    slot = by_start[j[claimed]] * w + k[claimed] if claimed.any() else np.zeros(0, dtype=np.int64)
    alloc = sums(slot, dt[claimed], len(claims) * w)
    energy = sums(slot, joules[claimed], len(claims) * w)
    for c, claim in enumerate(claims):
        _claim_rows(view, u, c, claim, alloc[c * w : (c + 1) * w], energy[c * w : (c + 1) * w], rows)
    _free_rows(view, u, (k, t0, t1, joules), ~claimed & down_now, ~claimed & ~down_now, rows)


def _claim_rows(view: NodeView, u: int, c: int, claim: Claim, alloc: Floats, energy: Floats, rows: Rows) -> None:
    win = view.win
    end = win.ends if claim.end is None else np.minimum(claim.end, win.ends)
    start = np.maximum(claim.start, win.starts)
    ks = np.flatnonzero(view.active(claim) & (end > start))
    busy, observed = held_integrals(view.series.get(claim.uuid), start[ks], end[ks])
    a = alloc[ks]
    busy_s = np.minimum(busy, a)
    unobserved = np.minimum(np.maximum(a - observed, 0.0), a - busy_s)
    rows.add(
        window=ks,
        section=0,
        rank=view.rank[u, ks],
        sub=claim.rank,
        gpu=u,
        model=view.model[u, ks],
        kind=ALLOCATED,
        owner=claim.rank,
        gpu_seconds=a,
        busy=busy_s,
        unobserved=unobserved,
        energy=energy[ks],
    )


def _free_rows(
    view: NodeView,
    u: int,
    segments: tuple[Ints, Floats, Floats, Floats],
    unavailable: np.ndarray,
    free: np.ndarray,
    rows: Rows,
) -> None:
    """The GPU's unavailable and unallocated rows (with the busy time nobody held) per window;
    ``segments``: each segment's window, start, end and joules."""
    k, t0, t1, joules = segments
    dt = t1 - t0
    w = view.win.count
    lost = sums(k[unavailable], dt[unavailable], w)
    lost_energy = sums(k[unavailable], joules[unavailable], w)
    ks = np.flatnonzero(view.present[u] & (lost > EPSILON_S))
    rows.add(
        window=ks,
        section=0,
        rank=view.rank[u, ks],
        sub=LAST,
        gpu=u,
        model=view.model[u, ks],
        kind=UNAVAILABLE,
        owner=-1,
        gpu_seconds=lost[ks],
        busy=0.0,
        unobserved=0.0,
        energy=lost_energy[ks],
    )
    kf, spans = k[free], dt[free]
    left = sums(kf, spans, w)
    left_energy = sums(kf, joules[free], w)
    got, observed = held_integrals(view.series.get(view.uuids[u]), t0[free], t1[free])
    busy = sums(kf, got, w)
    unobserved = sums(kf, spans - observed, w)
    ks = np.flatnonzero(view.present[u] & (left > EPSILON_S))
    rows.add(
        window=ks,
        section=1,
        rank=view.rank[u, ks],
        sub=0,
        gpu=u,
        model=view.model[u, ks],
        kind=UNALLOCATED,
        owner=-1,
        gpu_seconds=left[ks],
        busy=np.minimum(busy[ks] * 1.0, left[ks]),
        unobserved=np.minimum(unobserved[ks] * 1.0, left[ks]),
        energy=left_energy[ks] * 1.0,
    )


def node_slot_rows(view: NodeView, rows: Rows) -> Floats:
    """The node-level slot's rows (declared GPUs no sample names); returns each window's physical GPUs."""
    win = view.win
    known = view.present.sum(axis=0)
    declared = view.declared
    slot_gpus = np.maximum(np.where(declared < 0, 0, declared) - known, 0)
    capped = ~((declared < 0) & (known == 0))
    unavailable = slot_gpus * view.node_down
    capacity = slot_gpus * (win.ends - win.starts) - unavailable
    unallocated = np.maximum(capacity - 0.0, 0.0)
    for kind, seconds, sub in ((UNALLOCATED, unallocated, 0), (UNAVAILABLE, unavailable, 1)):
        ks = np.flatnonzero(capped & (seconds > EPSILON_S))
        unobserved = seconds[ks] if kind == UNALLOCATED else 0.0
        rows.add(
            window=ks,
            section=2,
            rank=0,
            sub=sub,
            gpu=-1,
            model=view.declared_model[ks],
            kind=kind,
            owner=-1,
            gpu_seconds=seconds[ks],
            busy=0.0,
            unobserved=unobserved,
            energy=0.0,
        )
    return (known + slot_gpus).astype(np.float64)
