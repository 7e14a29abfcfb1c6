"""Which free slots a pending job gets: first fit over nodes, best-fit packing for whole GPUs.

The pool tracks free slots per node and GPUs blocked by a fatal XID. Slurm placements also
respect the acceptance-run reservations: a job may start on a reserved node only if its time
limit (plus a minute of slack) ends before the reservation begins.
"""

from __future__ import annotations

from pipelines.simulator.model.cluster import Cluster, Node, Slot
from pipelines.simulator.model.jobs import JobSpec

SLACK_S = 60


class Pool:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.free: dict[str, set[str]] = {n.name: {s.key for s in n.slots} for n in cluster.nodes}
        self.blocked: set[str] = set()  # GPU uuids showing a fatal XID
        self.reservations: dict[str, list[tuple[int, int]]] = {}
        self.slot_by_key = {s.key: s for s in cluster.all_slots()}

    # --- bookkeeping ----------------------------------------------------------------------
    def take(self, slots: list[Slot]) -> None:
        for slot in slots:
            self.free[slot.gpu.node].remove(slot.key)

    def release(self, slots: list[Slot]) -> None:
        for slot in slots:
            if slot.gpu.uuid not in self.blocked:
                self.free[slot.gpu.node].add(slot.key)

    def block(self, slot: Slot) -> None:
        self.blocked.add(slot.gpu.uuid)
        self.free[slot.gpu.node].discard(slot.key)

    def unblock(self, slot: Slot, held: bool) -> None:
        self.blocked.discard(slot.gpu.uuid)
        if not held:
            self.free[slot.gpu.node].add(slot.key)

    def reserve(self, nodes: tuple[str, ...], window: tuple[int, int]) -> None:
        for name in nodes:
            self.reservations.setdefault(name, []).append(window)

    # --- queries --------------------------------------------------------------------------
    def _free_whole(self, node: Node) -> list[Slot]:
        keys = self.free[node.name]
        return [s for s in node.slots if s.kind == "gpu" and s.key in keys]

    def _clear_of_reservations(self, node: str, start: int, limit_s: int) -> bool:
        return all(start + limit_s + SLACK_S <= r0 or start >= r1 for r0, r1 in self.reservations.get(node, ()))

    def place(self, spec: JobSpec, now: int, avoid: set[str]) -> list[Slot] | None:
        """Slots for one attempt of ``spec`` starting about ``now``, or None if it must wait."""
        if spec.reservation is not None:
            return self._place_pinned(spec)
        nodes = self.cluster.by_scheduler(spec.scheduler)
        if spec.request == "gpu":
            return self._place_whole(spec, nodes, now, avoid)
        kind = spec.request
        for node in sorted(nodes, key=lambda n: (n.name in avoid, self._turn(spec, n, len(nodes)))):
            keys = self.free[node.name]
            for slot in node.slots:
                fits = slot.mig is None or slot.mig.profile == spec.mig_profile
                if slot.key in keys and slot.kind == kind and fits:
                    return [slot]
        return None

    def _turn(self, spec: JobSpec, node: Node, n: int) -> int:
        """The order nodes are tried for a fractional request: by index; with modern sharing, a
        time-sliced replica from a node taken in turn by the job's sequence number, so every
        kind of shared node gets pods."""
        if self.cluster.modern and spec.request == "shared":
            return (node.index - spec.seq) % n
        return node.index

    def _place_whole(self, spec: JobSpec, nodes: list[Node], now: int, avoid: set[str]) -> list[Slot] | None:
        limit_s = (spec.time_limit_min or 0) * 60
        fits = []
        for node in nodes:
            if spec.gpu_type and node.model.short != spec.gpu_type:
                continue
            if spec.scheduler == "slurm" and not self._clear_of_reservations(node.name, now, limit_s):
                continue
            free = self._free_whole(node)
            if len(free) >= spec.count:
                fits.append((node.name in avoid, len(free), node.index, free))
        if len(fits) < spec.nodes:
            return None
        fits.sort(key=lambda f: f[:3])
        slots: list[Slot] = []
        for *_, free in sorted(fits[: spec.nodes], key=lambda f: f[2]):
            slots.extend(free[: spec.count])
        return slots

    def _place_pinned(self, spec: JobSpec) -> list[Slot] | None:
        """An acceptance run takes every GPU of each pinned node that is wholly free."""
        slots: list[Slot] = []
        for name in spec.pinned_nodes:
            free = self._free_whole(self.cluster.node(name))
            if len(free) == spec.count:
                slots.extend(free)
        return slots or None
