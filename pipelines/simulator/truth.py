"""The ground truth, computed from the simulation's own state (never from gpuledger's parsers).

For the report window ``[S, E)`` and docs/ATTRIBUTION.md's rules:

* allocated: every attempt's slots from its start to its end (or ``E``), weighted by the slot's
  GPU fraction (MIG g/7, a time-sliced or MPS replica 1/N with N the node's replicas, a seat of
  a shared DRA claim 1/n with n the pods holding the claim at that instant: ``ClaimShares``);
* busy: ``∫`` of the published utilisation step function over each allocation (a time-sliced
  replica gets ``util / 4``), where a scrape's value holds for one interval, or up to three
  across missing scrapes; beyond that the allocated time is **unobserved**;
* unavailable: time a GPU shows a fatal XID while no slot of it is held; unallocated: the rest,
  computed independently from the gaps between holdings, so ``capacity = allocated +
  unallocated + unavailable`` is a real check (per GPU, node, GPU model, cluster);
* failed: allocation of attempts that ended in failure; lost: their allocation after the last
  completed checkpoint *write* (restores do not count), the whole attempt without one;
* energy: ``∫`` of the GPU's power over each allocation, weighted like busy by the slot's fraction
  (whole, g/7, 1/4), where a scrape's power holds for one interval, or up to three across missing
  scrapes (the energy counter rises by exactly that power from one scrape to the next, so a reader
  of either gets the same joules);
* idle causes (``idle_causes``, by team, model and node): each allocation's idle GPU-seconds split
  by what the simulator planted (:mod:`pipelines.simulator.causes`);
* business unit per the org version in force (versions start on whole hours, so every window
  has one version).

Group values carry ``allocated/busy/failed/unobserved/lost_gpu_seconds`` and ``energy_joules``; groups ``node``,
``gpu_model`` and ``cluster`` also carry ``capacity/unallocated/unavailable_gpu_seconds``.
Groups without any allocation (team ``speech``) are absent.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np

from pipelines.simulator.causes import CauseTruth
from pipelines.simulator.config import HOLD_INTERVALS, UNIT, SimConfig
from pipelines.simulator.dcgm_view import Metrics
from pipelines.simulator.failures import scheduler_state
from pipelines.simulator.intervals import Interval, StepIntegral, clip, intersect, measure, union
from pipelines.simulator.model.cluster import Cluster, Gpu
from pipelines.simulator.model.jobs import Attempt, SimState
from pipelines.simulator.org import UNKNOWN_MODEL, OrgVersion, team_of
from pipelines.simulator.sharing import ClaimShares
from pipelines.times import utc_text

FIELDS = ("allocated", "busy", "failed", "unobserved", "lost")
ATTEMPT_GROUPS = ("team", "model", "namespace", "account", "failure_reason", "job", "logical_job", "cluster")


def observed(util: np.ndarray, sampled: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(utilisation as held, 1 where unobserved) per scrape step, by the sample-and-hold rule."""
    if sampled.all():
        return util, np.zeros(len(util))
    idx = np.where(sampled, np.arange(len(util)), -1)
    last = np.maximum.accumulate(idx)
    held = (last >= 0) & (np.arange(len(util)) - last < HOLD_INTERVALS)
    values = np.where(held, util[np.maximum(last, 0)], 0.0)
    return values, (~held).astype(float)


class _Acc:
    def __init__(self) -> None:
        self.units: dict[str, int] = defaultdict(int)  # allocated / failed / unobserved / lost in 1/UNIT
        self.busy: list[float] = []
        self.energy: list[float] = []  # joules

    def add(self, alloc: int, busy: float, failed: int, unobs: int, lost: int, energy: float = 0.0) -> None:
        for name, value in (("allocated", alloc), ("failed", failed), ("unobserved", unobs), ("lost", lost)):
            self.units[name] += value
        self.busy.append(busy)
        self.energy.append(energy)

    def out(self) -> dict[str, float]:
        d = {f"{f}_gpu_seconds": self.units[f] / UNIT for f in FIELDS if f != "busy"}
        d["busy_gpu_seconds"] = math.fsum(self.busy)
        return {**{f"{f}_gpu_seconds": d[f"{f}_gpu_seconds"] for f in FIELDS}, "energy_joules": math.fsum(self.energy)}


def attempt_keys(attempt: Attempt, cluster_name: str) -> dict[str, str | None]:
    spec = attempt.spec
    return {
        "team": team_of(label_team=spec.team_label, namespace=spec.namespace, account=spec.account),
        "model": spec.model if spec.model_via != "none" and spec.model else UNKNOWN_MODEL,
        "namespace": spec.namespace,
        "account": spec.account,
        "failure_reason": attempt.reason if attempt.end is not None and attempt.reason else "none",
        "job": attempt.job_id,
        "logical_job": attempt.logical_job,
        "cluster": cluster_name,
    }


class Truth:
    def __init__(
        self, cfg: SimConfig, cluster: Cluster, state: SimState, metrics: Metrics, versions: list[OrgVersion]
    ) -> None:
        self.cfg, self.cluster, self.state, self.m, self.versions = cfg, cluster, state, metrics, versions
        self.groups: dict[str, dict[str, _Acc]] = defaultdict(lambda: defaultdict(_Acc))
        self.gpu_acc: dict[str, _Acc] = defaultdict(_Acc)
        self.integrals: dict[str, tuple[StepIntegral, StepIntegral]] = {}
        self.power: dict[str, StepIntegral] = {}  # per entity: the GPU's power as held (W)
        for key, ent in metrics.entities.items():
            values, unobs = observed(ent.util, metrics.present(ent))
            self.integrals[key] = (
                StepIntegral(values, cfg.scrape_interval_s, cfg.horizon),
                StepIntegral(unobs, cfg.scrape_interval_s, cfg.horizon),
            )
            watts, _ = observed(metrics.power[ent.gpu.uuid], metrics.present(ent))
            self.power[key] = StepIntegral(watts, cfg.scrape_interval_s, cfg.horizon)
        self.attempts: list[dict[str, Any]] = []
        self.by_gpu: dict[str, list[Attempt]] = {}
        self.shares = ClaimShares(state.attempts, cfg.horizon)

    def _bu_pieces(self, a: int, b: int, team: str) -> list[tuple[int, int, str]]:
        out = []
        for i, version in enumerate(self.versions):
            until = self.versions[i + 1].effective_from if i + 1 < len(self.versions) else self.cfg.horizon
            piece = clip(a, b, max(version.effective_from, 0), until)
            if piece:
                out.append((*piece, version.bu_of(team)))
        return out

    def add_attempt(self, attempt: Attempt) -> None:
        horizon = self.cfg.horizon
        span = clip(attempt.start, attempt.end if attempt.end is not None else horizon, 0, horizon)
        keys = attempt_keys(attempt, self.cfg.cluster)
        failed = attempt.end is not None and attempt.reason is not None
        ckpt = attempt.last_checkpoint() if failed else None
        alloc_total = lost_total = 0
        if span is not None:
            for slot in attempt.slots:
                busy_i, unobs_i = self.integrals[slot.series]
                gpu = slot.gpu
                node = self.cluster.node(gpu.node)
                pieces = [
                    (a, b, w, bu)
                    for a0, b0, bu in self._bu_pieces(*span, keys["team"] or "")
                    for a, b, w in self.shares.pieces(slot, a0, b0)
                ]
                for a, b, weight, bu in pieces:
                    alloc = weight * (b - a)
                    busy = weight / UNIT * busy_i.over(a, b)
                    energy = weight / UNIT * self.power[slot.series].over(a, b)
                    unobs = weight * int(round(unobs_i.over(a, b)))
                    lost_piece = clip(max(attempt.start, ckpt or attempt.start), b, a, b) if failed else None
                    lost = weight * (lost_piece[1] - lost_piece[0]) if lost_piece else 0
                    row = (alloc, busy, alloc if failed else 0, unobs, lost, energy)
                    for group in ATTEMPT_GROUPS:
                        if keys[group] is not None:
                            self.groups[group][keys[group]].add(*row)  # type: ignore[index]
                    self.groups["business_unit"][bu].add(*row)
                    self.groups["node"][gpu.node].add(*row)
                    self.groups["gpu_model"][node.model.short].add(*row)
                    self.gpu_acc[gpu.uuid].add(*row)
                    alloc_total += alloc
                    lost_total += lost
        self.attempts.append(self._attempt_record(attempt, keys, alloc_total, lost_total))

    def _attempt_record(self, attempt: Attempt, keys: dict[str, str | None], alloc: int, lost: int) -> dict[str, Any]:
        spec, at = attempt.spec, self.cfg.at
        previous = spec.attempts[spec.attempts.index(attempt) - 1] if attempt.number > 1 else None
        since = previous.end if previous is not None and previous.end is not None else attempt.submit
        wait = attempt.start - since
        return {
            "job_id": attempt.job_id,
            "logical_job": attempt.logical_job,
            "attempt": attempt.number,
            "scheduler": spec.scheduler,
            "kind": spec.kind,
            "submit": utc_text(at(attempt.submit)),
            "start": utc_text(at(attempt.start)),
            "end": utc_text(at(attempt.end)) if attempt.end is not None else None,
            "outcome": attempt.outcome,
            "failure_reason": keys["failure_reason"] if attempt.reason else None,
            "scheduler_state": scheduler_state(spec.scheduler, attempt.reason, attempt.end is not None),
            "gpu_seconds": alloc / UNIT,
            "lost_gpu_seconds": lost / UNIT,
            "queue_seconds": wait,
            "queue_gpu_seconds": wait * spec.gpus_requested,
            "gpus": spec.gpus_requested,
            "nodes": attempt.nodes,
            "team": keys["team"],
            "model": keys["model"],
            "namespace": spec.namespace,
            "account": spec.account,
        }

    def capacity(self, gpu: Gpu) -> dict[str, int]:
        """Capacity split of one GPU in 1/UNIT GPU-seconds, from holdings and XID intervals."""
        horizon = self.cfg.horizon
        held: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for attempt in self.by_gpu.get(gpu.uuid, []):
            for slot in attempt.slots:
                if slot.gpu is gpu:
                    span = clip(attempt.start, attempt.end if attempt.end is not None else horizon, 0, horizon)
                    if span:
                        held[slot.key].append(span)
        xid = union(
            [s for x in self.state.xids if x.gpu == gpu.uuid for s in [clip(x.at, x.repaired, 0, horizon)] if s]
        )
        node = self.cluster.node(gpu.node)
        parts: dict[str, tuple[int, list[Interval], bool]] = {}  # part of the GPU: weight, holdings, whole
        for slot in (s for s in node.slots if s.gpu is gpu):
            if slot.kind == "claim":  # a shared claim's device: held while any seat is
                _, spans, _ = parts.get(gpu.uuid, (UNIT, [], True))
                parts[gpu.uuid] = (UNIT, spans + held.get(slot.key, []), True)
            else:
                parts[slot.key] = (slot.weight, held.get(slot.key, []), slot.kind == "gpu")
        unalloc = unavail = 0
        for weight, spans, whole in parts.values():
            mine = union(spans)
            down = measure(xid) - measure(intersect(xid, mine)) if whole else 0
            unavail += weight * down
            unalloc += weight * (horizon - measure(union(mine + xid)))
        if gpu.layout == "mig":
            unalloc += UNIT * (7 - sum(m.slices for m in gpu.mig)) // 7 * horizon
        return {"capacity": UNIT * horizon, "unallocated": unalloc, "unavailable": unavail}


def _capacity_groups(t: Truth) -> tuple[dict[str, dict[str, dict[str, int]]], dict[str, dict[str, Any]]]:
    sums: dict[str, dict[str, dict[str, int]]] = {
        g: defaultdict(lambda: defaultdict(int)) for g in ("node", "gpu_model", "cluster")
    }
    gpus: dict[str, dict[str, Any]] = {}
    for gpu in t.cluster.all_gpus():
        node = t.cluster.node(gpu.node)
        cap = t.capacity(gpu)
        for group, key in (("node", gpu.node), ("gpu_model", node.model.short), ("cluster", t.cfg.cluster)):
            for name, value in cap.items():
                sums[group][key][name] += value
        acc = t.gpu_acc[gpu.uuid].out()
        gpus[gpu.uuid] = {
            "node": gpu.node,
            "index": gpu.index,
            "gpu_model": node.model.short,
            "layout": gpu.layout,
            **{f"{k}_gpu_seconds": v / UNIT for k, v in cap.items()},
            **acc,
        }
    return sums, gpus


def build_truth(
    cfg: SimConfig,
    cluster: Cluster,
    state: SimState,
    metrics: Metrics,
    versions: list[OrgVersion],
    malformed: dict[str, int],
    extras: dict[str, Any],
    planted: tuple[dict[str, list[Interval]], dict[str, list[Interval]]] = ({}, {}),
) -> dict[str, Any]:
    """The ``truth.json`` document; ``planted`` is (storage stall, degraded fabric) intervals per node."""
    t = Truth(cfg, cluster, state, metrics, versions)
    causes = CauseTruth(cfg, t.integrals, *planted, t.shares)
    t.by_gpu = defaultdict(list)
    for attempt in state.attempts:
        for uuid in {s.gpu.uuid for s in attempt.slots}:
            t.by_gpu[uuid].append(attempt)
    for attempt in sorted(state.attempts, key=lambda a: (a.start, a.job_id, a.number)):
        t.add_attempt(attempt)
        causes.add(attempt, attempt_keys(attempt, cfg.cluster))
    sums, gpus = _capacity_groups(t)
    by: dict[str, dict[str, dict[str, float]]] = {}
    for group in (
        "team",
        "business_unit",
        "model",
        "namespace",
        "account",
        "failure_reason",
        "gpu_model",
        "node",
        "cluster",
        "job",
        "logical_job",
    ):
        rows = {key: acc.out() for key, acc in sorted(t.groups[group].items())}
        if group in sums:
            for key, cap in sorted(sums[group].items()):
                rows.setdefault(key, _Acc().out()).update({f"{k}_gpu_seconds": v / UNIT for k, v in cap.items()})
            rows = dict(sorted(rows.items()))
        by[group] = rows
    total = by["cluster"][cfg.cluster]
    return {
        "start": utc_text(cfg.start),
        "end": utc_text(cfg.end),
        "cluster": cfg.cluster,
        "nodes": cfg.nodes,
        "hours": cfg.hours,
        "seed": cfg.seed,
        "scrape_interval_s": cfg.scrape_interval_s,
        **{
            f"{k}_gpu_seconds": total[f"{k}_gpu_seconds"]
            for k in ("capacity", "unallocated", "unavailable", "unobserved", "busy", "allocated", "failed", "lost")
        },
        "by": by,
        "gpus": gpus,
        "attempts": t.attempts,
        "idle_causes": causes.out(),
        "malformed_records": malformed,
        **extras,
    }
