"""The dcgm-exporter view of the simulation: one value per entity per scrape time.

An *entity* is what dcgm-exporter reports a series for: a whole or time-sliced GPU, or a MIG
instance. At scrape ``k`` (time ``S + k*interval``) each entity publishes the utilisation of
whoever holds it at that instant (0 if nobody, or if the holder's container is not running yet
or is backing off, or after its GPU fell off the bus); a time-sliced GPU publishes the sum of its
replicas' workloads, capped at 1. Published values are quantised as the exporter prints them
(ratio to 3 decimals; percent as an integer on nodes without ``DCGM_FI_PROF_*``), and ``util`` is
exactly what a reader of the series gets back. The value of scrape ``k`` holds on
``[t_k, t_k + interval)`` — the step function the ground truth integrates.

``holder`` names the pod (``namespace``/``pod``/``container``) or Slurm job (``hpc_job``) that the
exporter's mapping labels the series with at that scrape (none on time-sliced GPUs).

``power`` is each GPU's draw (W) per scrape, holding like the utilisation; ``energy`` is its
``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` counter (whole mJ since the driver loaded), which rises by
exactly that power × interval from one scrape to the next. The driver reloads — the counter starts
again from 0 — when a GPU that fell off the bus comes back, and once mid-run on one healthy GPU
(a GPU reset), so the readers' reset handling is exercised.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pipelines.simulator import sharing
from pipelines.simulator.config import SimConfig
from pipelines.simulator.model.cluster import Cluster, Gpu, MigInstance, Node, Slot
from pipelines.simulator.model.jobs import Attempt, SimState
from pipelines.simulator.utilization import attempt_stream, fb_share, loading_seconds, workload_util


@dataclass
class Entity:
    key: str  # GPU uuid or "<uuid>/mig<gi>"
    node: Node
    gpu: Gpu
    mig: MigInstance | None
    util: np.ndarray  # published utilisation ratio per scrape
    fb: np.ndarray  # MiB used per scrape
    holder: np.ndarray  # index into Metrics.labels per scrape (0: nobody)


@dataclass
class Metrics:
    steps: int
    interval: int
    entities: dict[str, Entity]
    power: dict[str, np.ndarray]  # per GPU uuid
    xid: dict[str, np.ndarray]  # per GPU uuid
    sampled: dict[str, np.ndarray]  # per node: scrape present
    # per GPU uuid: scrape steps it is absent from (a GPU that fell off the bus has no series)
    gone: dict[str, np.ndarray] = field(default_factory=dict)
    labels: list[dict[str, str]] = field(default_factory=lambda: [{}])
    gap: tuple[str, int, int] | None = None  # node, first missing scrape, first scrape back
    energy: dict[str, np.ndarray] = field(default_factory=dict)  # per GPU uuid: the counter (mJ) per scrape
    counter_reset: tuple[str, int] | None = None  # the healthy GPU whose driver reloads, and at which scrape
    label_index: dict[tuple[tuple[str, str], ...], int] = field(default_factory=dict)
    # per entity of a shared DRA claim: (label id, first scrape, end scrape) of every pod holding it,
    # whose series dcgm-exporter repeats once per pod
    co_holders: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)

    def present(self, ent: Entity) -> np.ndarray:
        """The scrape steps that carry this entity's series: its node's scrapes, minus the time its
        GPU was off the bus."""
        gone = self.gone.get(ent.gpu.uuid)
        return self.sampled[ent.node.name] if gone is None else self.sampled[ent.node.name] & ~gone

    def label_id(self, labels: dict[str, str]) -> int:
        key = tuple(sorted(labels.items()))
        if key not in self.label_index:
            self.labels.append(labels)
            self.label_index[key] = len(self.labels) - 1
        return self.label_index[key]


def _mig_fb(profile: str) -> int:
    return int(profile.split(".")[1].removesuffix("gb")) * 1024 - 512


def _entities(cluster: Cluster, steps: int) -> dict[str, Entity]:
    out = {}
    for node in cluster.nodes:
        for gpu in node.gpus:
            for mig in gpu.mig or (None,):
                key = gpu.uuid if mig is None else f"{gpu.uuid}/mig{mig.gi}"
                out[key] = Entity(key, node, gpu, mig, np.zeros(steps), np.zeros(steps), np.zeros(steps, np.int32))
    return out


def _holder_label(attempt: Attempt) -> dict[str, str]:
    spec = attempt.spec
    if attempt.pod is not None:
        return {"namespace": spec.namespace or "", "pod": attempt.pod.name, "container": container_name(spec)}
    return {"hpc_job": attempt.job_id}


def _slot_label(m: Metrics, attempt: Attempt, slot: Slot, cache: dict[str, int]) -> int:
    """The holder's label id on the slot's series: a device held through a DRA claim adds the claim."""
    if m.entities[slot.series].node.sharing != sharing.DRA:
        if "" not in cache:
            cache[""] = m.label_id(_holder_label(attempt))
        return cache[""]
    return m.label_id({**_holder_label(attempt), **sharing.dra_labels(attempt, slot)})


def container_name(spec: object) -> str:
    kind = getattr(spec, "kind", "")
    return {"training": "trainer", "inference": "server", "notebook": "notebook"}.get(kind, "worker")


def _step_range(cfg: SimConfig, a: int, b: int) -> tuple[int, int]:
    """Scrape indices k with a <= t_k < b."""
    step = cfg.scrape_interval_s
    return max(-(-a // step), 0), min(-(-b // step), cfg.steps)


def _apply(cfg: SimConfig, m: Metrics, attempt: Attempt, raw: dict[str, np.ndarray]) -> None:
    step, end = cfg.scrape_interval_s, attempt.end if attempt.end is not None else cfg.horizon
    k0, k1 = _step_range(cfg, attempt.start, end)
    if k1 <= k0:
        return
    times = np.arange(k0, k1) * step
    rng = attempt_stream(cfg.seed, attempt)
    running = times >= attempt.run_start
    base = workload_util(attempt, times, cfg.start_epoch, rng)
    share = fb_share(attempt, rng)
    loading = loading_seconds(cfg.seed, attempt)
    labels: dict[str, int] = {}
    for slot in attempt.slots:
        label = _slot_label(m, attempt, slot, labels)
        ent = m.entities[slot.series]
        util = np.where(running, np.clip(base + rng.normal(0.0, 0.01, len(times)), 0.0, 1.0), 0.0)
        util[times < attempt.run_start + loading] = 0.0
        if attempt.xid_gpu == slot.gpu.uuid and attempt.xid_time is not None:
            util[times >= attempt.xid_time] = 0.0
        capacity = _mig_fb(ent.mig.profile) if ent.mig else ent.node.model.fb_mib
        if slot.kind in ("shared", "claim"):
            capacity //= slot.gpu.replicas
            raw.setdefault(ent.key, np.zeros(cfg.steps))[k0:k1] += util
            if slot.kind == "claim":
                m.co_holders.setdefault(ent.key, []).append((label, k0, k1))
        else:
            ent.util[k0:k1] = util
            ent.holder[k0:k1] = label
        ent.fb[k0:k1] += np.where(running, np.round(capacity * share), 0.0)


def _quantise(m: Metrics) -> None:
    for ent in m.entities.values():
        ent.util = np.round(ent.util, 3) if ent.node.has_prof else np.round(ent.util * 100.0) / 100.0


def _power_xid(cfg: SimConfig, m: Metrics, state: SimState, rng: np.random.Generator) -> None:
    for ent in m.entities.values():
        gpu, model = ent.gpu, ent.node.model
        weight = (ent.mig.slices / 7.0) if ent.mig else 1.0
        m.power.setdefault(gpu.uuid, np.zeros(cfg.steps))
        m.power[gpu.uuid] += ent.util * weight * (model.max_w - model.idle_w)
        m.xid.setdefault(gpu.uuid, np.zeros(cfg.steps, np.int32))
    for uuid, power in m.power.items():
        idle = next(e.node.model.idle_w for e in m.entities.values() if e.gpu.uuid == uuid)
        m.power[uuid] = np.round(power * rng.uniform(0.85, 1.0, cfg.steps) + idle + rng.normal(0, 2.0, cfg.steps), 3)
    step = cfg.scrape_interval_s
    for x in state.xids:
        m.xid[x.gpu][x.at // step : x.repaired // step] = 79
        # XID 79: the GPU fell off the bus. The scrape that saw it is the last one with its series
        # until the repair brings it back.
        gone = m.gone.setdefault(x.gpu, np.zeros(cfg.steps, bool))
        gone[x.at // step + 1 : x.repaired // step] = True


def _energy(cfg: SimConfig, m: Metrics, state: SimState) -> None:
    step = cfg.scrape_interval_s
    resets: dict[str, set[int]] = {}
    for x in state.xids:
        resets.setdefault(x.gpu, set()).add(x.repaired // step)
    failing = {x.gpu for x in state.xids}
    healthy = sorted(u for u in m.power if u not in failing)
    if healthy and cfg.steps > 8:
        m.counter_reset = (healthy[len(healthy) // 2], cfg.steps // 3 + 1)
        resets.setdefault(m.counter_reset[0], set()).add(m.counter_reset[1])
    for n, uuid in enumerate(sorted(m.power)):
        increments = np.round(m.power[uuid] * step * 1000.0)  # mJ drawn from one scrape to the next
        counter = np.empty(cfg.steps)
        value = float((n + 1) * 7_919_000_000)  # mJ since the driver loaded, before the simulation
        for k in range(cfg.steps):
            if k in resets.get(uuid, ()):
                value = 0.0
            counter[k] = value
            value += increments[k]
        m.energy[uuid] = counter


def build_metrics(
    cfg: SimConfig,
    cluster: Cluster,
    state: SimState,
    rng: np.random.Generator,
    adjust: Callable[[Metrics], None] | None = None,
) -> Metrics:
    """The metrics of every entity; ``adjust`` changes the utilisation before it is quantised
    (the planted storage stall)."""
    steps = cfg.steps
    m = Metrics(
        steps,
        cfg.scrape_interval_s,
        _entities(cluster, steps),
        {},
        {},
        {n.name: np.ones(steps, bool) for n in cluster.nodes},
    )
    raw: dict[str, np.ndarray] = {}
    for attempt in state.attempts:
        _apply(cfg, m, attempt, raw)
    for key, total in raw.items():
        m.entities[key].util = np.minimum(total, 1.0)
    if adjust is not None:
        adjust(m)
    _quantise(m)
    _power_xid(cfg, m, state, rng)
    _energy(cfg, m, state)
    return m
