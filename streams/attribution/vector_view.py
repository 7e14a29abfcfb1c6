"""The node as the vectorised attribution sees it: which GPUs are in each window, and in what order.

Mirrors, for all windows at once, what ``compute._window_view`` and ``compute._with_inventory`` and
the top of ``core.attribute_window_full`` decide per window: a GPU with a sample within 3 scrape
intervals before or in the window is there with its samples' index and model; else one the
inventory lists (reported within the horizon), with the inventory's; else one a running claim
names, index unknown, model ``unknown``. GPUs are ordered by (index unknown, index, uuid).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from streams.attribution.core import Owner, _merged
from streams.attribution.node_range import INVENTORY_HORIZON_S, NodeInputs
from streams.attribution.vector_series import Floats, NodeSeries, down_intervals, keys

Bools = npt.NDArray[np.bool_]
Ints = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Claim:
    """A placement's claim on one whole GPU; ``rank`` is the core's order of its placement."""

    rank: int
    owner: Owner
    uuid: str
    start: float
    end: float | None
    by_index: bool = False  # bound by a Slurm GPU index: the window's samples or inventory map it


@dataclass
class Windows:
    starts: Floats  # w0 of every window, added up as the scalar loop adds them
    ends: Floats

    @property
    def count(self) -> int:
        return int(self.starts.size)


def window_edges(start: float, end: float, window_s: int) -> Windows:
    edges = [start]
    w0 = start
    while w0 < end:
        w0 = w0 + window_s
        edges.append(w0)
    arr = np.array(edges, dtype=np.float64)
    return Windows(arr[:-1], arr[1:])


class NodeView:
    """Per GPU (row) and window (column): present, index, model; and each GPU's unavailable spans."""

    def __init__(self, win: Windows, series: NodeSeries | None, claims: Sequence[Claim], inputs: NodeInputs):
        self.win, self.series, self.claims = win, series, claims
        sampled = series.uuids if series is not None else []  # rows 0.. are the sampled GPUs, in order
        names = dict.fromkeys([*sampled, *(g.uuid for g in inputs.inventory), *(c.uuid for c in claims)])
        self.uuids = list(names)
        self.row = {u: i for i, u in enumerate(self.uuids)}
        shape = (len(self.uuids), win.count)
        self.present = np.zeros(shape, dtype=bool)
        self.index = np.full(shape, -1, dtype=np.int64)  # -1: unknown
        self.models: list[str] = ["unknown"]
        self.model = np.zeros(shape, dtype=np.int64)  # code into ``models``
        self._from_samples()
        self._from_inventory(inputs)
        self.known = self.present.copy()  # GPUs the samples or the inventory name (their indices map)
        self._from_claims()
        self.rank = self._order()
        self._contexts(inputs)
        prior = {g.uuid: g.down_since for g in inputs.inventory if g.down_since is not None}
        self.down_edges = [self._down(u, prior.get(u)) for u in self.uuids]  # as the core cuts at them
        self.down = [_merged(d) for d in self.down_edges]  # to tell whether a segment is covered

    def model_code(self, model: str) -> int:
        if model not in self.models:
            self.models.append(model)
        return self.models.index(model)

    def _set(self, u: int, where: Bools, index: int | None, model: str) -> None:
        self.present[u, where] = True
        self.index[u, where] = -1 if index is None else index
        self.model[u, where] = self.model_code(model)

    def _from_samples(self) -> None:
        ns, w = self.series, self.win
        if ns is None:
            return
        gpus = len(ns.uuids)
        g = np.repeat(np.arange(gpus), w.count)
        lo = (w.starts[None, :] - ns.hold[:, None]).ravel()
        sk, lk, hk = keys(ns.gpu, ns.times, (g, lo), (g, np.tile(w.ends, gpus)))
        seen = (np.searchsorted(sk, hk, "left") > np.searchsorted(sk, lk, "left")).reshape(gpus, w.count)
        for u in range(gpus):
            self._set(u, seen[u], ns.index[u], ns.model[u])

    def _from_inventory(self, inputs: NodeInputs) -> None:
        w = self.win
        for g in inputs.inventory:
            u = self.row[g.uuid]
            recent = (g.first_seen < w.ends) & (g.last_seen >= w.starts - INVENTORY_HORIZON_S)
            self._set(u, recent & ~self.present[u], g.index, g.model)

    def _from_claims(self) -> None:
        for c in self.claims:
            u = self.row[c.uuid]
            self._set(u, self.active(c) & ~self.present[u], None, "unknown")

    def named_by_samples_or_inventory(self, c: Claim) -> bool:
        """Whether the claim's GPU is one of the window's known GPUs in every window it runs in."""
        active = self.active(c)
        return bool(np.all(self.known[self.row[c.uuid], active]))

    def claim_spans(self, lo: float, hi: float) -> tuple[Floats, Floats]:
        """Each claim's time clipped to [lo, hi) (an open end: ``hi``)."""
        starts = np.array([max(c.start, lo) for c in self.claims], dtype=np.float64)
        ends = np.array([min(c.end if c.end is not None else hi, hi) for c in self.claims], dtype=np.float64)
        return starts, ends

    def active(self, c: Claim) -> Bools:
        """The windows in which the claim's placement runs (the core's ``active``)."""
        w = self.win
        running = w.ends > c.start
        return running if c.end is None else running & (w.starts < c.end)

    def _order(self) -> Ints:
        """Each present GPU's position in its window's GPU order."""
        us, ks = np.nonzero(self.present)
        by_name = np.argsort(np.argsort(np.array(self.uuids, dtype=object)))
        idx = self.index[us, ks]
        order = np.lexsort((by_name[us], np.maximum(idx, 0), idx < 0, ks))
        first = np.searchsorted(ks[order], np.arange(self.win.count), "left")
        rank = np.full(self.present.shape, -1, dtype=np.int64)
        rank[us[order], ks[order]] = np.arange(order.size) - first[ks[order]]
        return rank

    def _contexts(self, inputs: NodeInputs) -> None:
        """Per window: the declared GPUs (-1: none), their model, seconds the node was drained or down."""
        w = self.win
        self.declared = np.full(w.count, -1, dtype=np.int64)
        self.declared_model = np.zeros(w.count, dtype=np.int64)
        self.node_down = np.zeros(w.count)
        self.node_spans: list[tuple[float, float]] = []
        if not inputs.states:
            return
        self.node_spans = list(inputs.context(float(w.starts[0]), float(w.ends[-1])).unavailable)
        for k, (w0, w1) in enumerate(zip(w.starts.tolist(), w.ends.tolist(), strict=True)):
            ctx = inputs.context(w0, w1)
            self.declared[k] = -1 if ctx.declared_gpus is None else ctx.declared_gpus
            self.declared_model[k] = self.model_code(ctx.declared_model)
            self.node_down[k] = sum(max(min(e, w1) - max(s, w0), 0.0) for s, e in _merged(ctx.unavailable))

    def _down(self, uuid: str, since: float | None) -> list[tuple[float, float]]:
        """The GPU's unavailable spans: fatal XIDs, the node drained or down."""
        return [*down_intervals(self.series, self.row[uuid], since), *self.node_spans]
