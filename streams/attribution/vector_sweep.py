"""A node's GPUs and windows swept at once, and the node-level slot of every window (numpy).

The core (``core._gpu_segments``) cuts each window of a GPU at its claims' and unavailable spans'
edges; here each GPU's whole range is cut at the union of those edges and of the window edges,
which is the same set of cuts window by window. A segment is claimed (by at most one claim: the
vectorised path covers no conflict), unavailable, or free; the sums over segments and over sample
pieces run in the core's order, so every value is the core's to the bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from streams.attribution.core import EPSILON_S
from streams.attribution.vector_series import Floats, Ints, NodeSeries, energy_integrals, held_integrals, keys, sums
from streams.attribution.vector_view import NodeView

ALLOCATED, UNAVAILABLE, UNALLOCATED = 0, 1, 2
LAST = 1 << 40  # after every claim's rank: a GPU's unavailable row follows its allocated rows


@dataclass
class Rows:
    """Fact rows as columns (chunks concatenated at the end); ``gpu`` -1 is the node-level slot."""

    chunks: dict[str, list[np.ndarray]] = field(default_factory=dict)

    def add(self, **cols: np.ndarray | int | float) -> None:
        size = np.size(cols["window"])
        for name, value in cols.items():
            arr = value if isinstance(value, np.ndarray) else np.full(size, value)
            self.chunks.setdefault(name, []).append(arr)

    def column(self, name: str) -> np.ndarray:
        return np.concatenate(self.chunks[name]) if name in self.chunks else np.zeros(0)


@dataclass
class Segments:
    gpu: Ints
    window: Ints
    t0: Floats
    t1: Floats
    claim: Ints  # -1: no claim
    down: npt.NDArray[np.bool_]


def _cover(groups: Ints, starts: Floats, ends: Floats, sg: Ints, t0: Floats, t1: Floats) -> tuple[Ints, np.ndarray]:
    """For each segment, the interval of its GPU (disjoint per GPU) covering it, and whether one does."""
    if not starts.size or not t0.size:
        return np.zeros(t0.size, dtype=np.int64), np.zeros(t0.size, dtype=bool)
    order = np.lexsort((starts, groups))
    groups, starts, ends = groups[order], starts[order], ends[order]
    ik, sk = keys(groups, starts, (sg, t0))
    j = np.searchsorted(ik, sk, "right") - 1
    jj = np.maximum(j, 0)
    return order[jj], (j >= 0) & (groups[jj] == sg) & (ends[jj] >= t1)


def segments(view: NodeView) -> Segments:
    """Every GPU's range cut at window, claim and unavailability edges, in the windows it is present in."""
    win = view.win
    gpus = len(view.uuids)
    lo_r, hi_r = float(win.starts[0]), float(win.ends[-1])
    edges = np.append(win.starts, win.ends[-1])
    cu = np.array([view.row[c.uuid] for c in view.claims], dtype=np.int64)
    cs, ce = view.claim_spans(lo_r, hi_r)
    real = ce > cs
    du, dt_ = [], []
    for u, spans in enumerate(view.down_edges):
        for s, e in spans:
            if s < hi_r and e > lo_r:
                du += [u, u]
                dt_ += [max(s, lo_r), min(e, hi_r)]
    g = np.concatenate([np.repeat(np.arange(gpus), edges.size), cu[real], cu[real], np.array(du, dtype=np.int64)])
    t = np.concatenate([np.tile(edges, gpus), cs[real], ce[real], np.array(dt_, dtype=np.float64)])
    order = np.lexsort((t, g))
    g, t = g[order], t[order]
    same = g[1:] == g[:-1]
    # consecutive distinct cuts of one GPU: (g, t) deduplicated, then pairs within a GPU
    first = np.r_[True, ~same | (t[1:] != t[:-1])] if g.size else np.zeros(0, dtype=bool)  # no cut: no GPU
    g, t = g[first], t[first]
    pair = g[1:] == g[:-1]
    sg, t0, t1 = g[:-1][pair], t[:-1][pair], t[1:][pair]
    k = np.searchsorted(win.starts, t0, "right") - 1
    keep = view.present[sg, k]
    sg, t0, t1, k = sg[keep], t0[keep], t1[keep], k[keep]
    j, claimed = _cover(cu[real], cs[real], ce[real], sg, t0, t1)
    claim = np.where(claimed, np.flatnonzero(real)[j] if real.any() else 0, -1)
    ds = np.array([s for d in view.down for s, _ in d])
    de = np.array([e for d in view.down for _, e in d])
    dg = np.array([u for u, d in enumerate(view.down) for _ in d], dtype=np.int64)
    _, down = _cover(dg, ds, de, sg, t0, t1)
    return Segments(sg, k, t0, t1, claim, down)


def attribute(view: NodeView, rows: Rows) -> None:
    """Every GPU row of every window: allocated per claim, unavailable, unallocated."""
    seg = segments(view)
    ns = view.series
    win = view.win
    w, gpus = win.count, len(view.uuids)
    dt = seg.t1 - seg.t0
    joules = energy_integrals(ns, seg.gpu, seg.t0, seg.t1, win.ends[seg.window])
    claimed = seg.claim >= 0
    at = seg.claim[claimed] * w + seg.window[claimed]
    alloc = sums(at, dt[claimed], len(view.claims) * w)
    energy = sums(at, joules[claimed], len(view.claims) * w)
    _claim_rows(view, ns, alloc, energy, rows)
    cell = seg.gpu * w + seg.window
    lost = ~claimed & seg.down
    _gpu_rows(view, UNAVAILABLE, sums(cell[lost], dt[lost], gpus * w), sums(cell[lost], joules[lost], gpus * w), rows)
    free = ~claimed & ~seg.down
    left = sums(cell[free], dt[free], gpus * w)
    got, observed = held_integrals(ns, seg.gpu[free], seg.t0[free], seg.t1[free])
    busy = sums(cell[free], got, gpus * w)
    unobserved = sums(cell[free], dt[free] - observed, gpus * w)
    _gpu_rows(view, UNALLOCATED, left, sums(cell[free], joules[free], gpus * w), rows, busy, unobserved)


def _claim_rows(view: NodeView, ns: NodeSeries | None, alloc: Floats, energy: Floats, rows: Rows) -> None:
    win = view.win
    if not view.claims:
        return
    starts = np.array([c.start for c in view.claims])
    ends = np.array([c.end if c.end is not None else np.inf for c in view.claims])
    s = np.maximum(starts[:, None], win.starts[None, :])
    e = np.minimum(ends[:, None], win.ends[None, :])  # an open end: the window's end
    running = (starts[:, None] < win.ends[None, :]) & (ends[:, None] > win.starts[None, :])
    c, k = np.nonzero(running & (e > s))
    gpu = np.array([view.row[x.uuid] for x in view.claims], dtype=np.int64)[c]
    busy, observed = held_integrals(ns, gpu, s[c, k], e[c, k])
    a = alloc[c * win.count + k]
    busy_s = np.minimum(busy, a)
    ranks = np.array([x.rank for x in view.claims], dtype=np.int64)[c]
    rows.add(
        window=k,
        section=0,
        rank=view.rank[gpu, k],
        sub=ranks,
        gpu=gpu,
        model=view.model[gpu, k],
        kind=ALLOCATED,
        owner=ranks,
        gpu_seconds=a,
        busy=busy_s,
        unobserved=np.minimum(np.maximum(a - observed, 0.0), a - busy_s),
        energy=energy[c * win.count + k],
    )


def _gpu_rows(
    view: NodeView,
    kind: int,
    seconds: Floats,
    energy: Floats,
    rows: Rows,
    busy: Floats | None = None,
    unobserved: Floats | None = None,
) -> None:
    """A GPU's unavailable or unallocated row in each window it has one (over a microsecond)."""
    u, k = np.nonzero(view.present & (seconds.reshape(view.present.shape) > EPSILON_S))
    cell = u * view.win.count + k
    left = seconds[cell]
    rows.add(
        window=k,
        section=0 if kind == UNAVAILABLE else 1,
        rank=view.rank[u, k],
        sub=LAST if kind == UNAVAILABLE else 0,
        gpu=u,
        model=view.model[u, k],
        kind=kind,
        owner=-1,
        gpu_seconds=left,
        busy=np.minimum(busy[cell] * 1.0, left) if busy is not None else 0.0,
        unobserved=np.minimum(unobserved[cell] * 1.0, left) if unobserved is not None else 0.0,
        energy=energy[cell] * 1.0,
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
