"""Job arrivals: Poisson per workload kind, with per-kind sizes, durations and owners.

Rates are per node-hour of the scheduler's share of the cluster, so offered load scales with
``--nodes``. Kubernetes: inference pods (ReplicaSet-owned, long-lived, diurnal utilisation, a
first batch at the start of the window), training Jobs (whole GPUs, checkpoints), batch Jobs
(whole GPU or MIG slice) and notebooks (bare pods on a 1g MIG slice or a time-sliced replica,
mostly idle). Slurm: training (single or multi-node, 8 GPUs per node when multi-node,
checkpoints) and batch. Nightly NCCL acceptance runs (02:00 UTC, or 25 minutes before the end of a
window without a night) reserve Slurm node sets of up to four nodes for 15 minutes.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from typing import TypeVar

import numpy as np

from pipelines.simulator import sharing
from pipelines.simulator.config import SimConfig
from pipelines.simulator.model.cluster import Cluster, Node
from pipelines.simulator.model.jobs import JobSpec
from pipelines.simulator.org import UNMAPPED_NAMESPACE
from pipelines.times import floor_day

T = TypeVar("T")
K8S_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
NIGHTLY_HOUR = 2
RESERVATION_S = 900
CHECKPOINT_BYTES = {
    "llama-70b": 423_000_000_000,
    "llama-8b": 96_000_000_000,
    "vit-l": 3_700_000_000,
    "vit-b": 1_050_000_000,
}
FIRST_SLURM_ID = 41001


def k8s_suffix(rng: np.random.Generator, n: int = 5) -> str:
    return "".join(K8S_ALPHABET[i] for i in rng.integers(0, len(K8S_ALPHABET), n))


def new_uid(rng: np.random.Generator) -> str:
    return str(uuid.UUID(bytes=rng.bytes(16), version=4))


def _loguniform(rng: np.random.Generator, lo: float, hi: float) -> int:
    return int(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def _arrivals(rng: np.random.Generator, rate_per_hour: float, horizon: int) -> list[int]:
    out: list[int] = []
    t = 0.0
    if rate_per_hour <= 0:
        return out
    while True:
        t += rng.exponential(3600.0 / rate_per_hour)
        if t >= horizon:
            return out
        out.append(int(t))


class _Builder:
    def __init__(self, cfg: SimConfig, cluster: Cluster, rng: np.random.Generator) -> None:
        self.cfg, self.cluster, self.rng = cfg, cluster, rng
        self.specs: list[JobSpec] = []

    def add(self, **kw: object) -> JobSpec:
        spec = JobSpec(seq=len(self.specs), **kw)  # type: ignore[arg-type]
        if spec.request == "mig" and spec.mig_slices:
            nodes = self.cluster.by_scheduler("kubernetes")  # a profile some node has, by node count
            spec.mig_profile = nodes[int(self.rng.integers(0, len(nodes)))].model.mig_profiles[spec.mig_slices]
        self.specs.append(spec)
        return spec

    def pick(self, options: Sequence[tuple[float, T]]) -> T:
        weights = np.array([w for w, _ in options], dtype=float)
        return options[int(self.rng.choice(len(options), p=weights / weights.sum()))][1]


# ------------------------------------------------------------------------------------------
# Kubernetes
# ------------------------------------------------------------------------------------------
def _k8s_inference(b: _Builder, t: int, initial: bool) -> None:
    rng, horizon = b.rng, b.cfg.horizon
    ns, model, deploy = b.pick(
        [(0.55, ("llm-serve", "llama-8b", "llama-8b-serve")), (0.45, ("search", "e5-large", "e5-search"))]
    )
    mig = rng.random() < 0.3
    # services outlive the window: they end only by failing (restarts, or a lost node)
    life = int(rng.uniform(1.2, 3.0) * horizon) if initial else horizon - t + _loguniform(rng, 3600, 12 * 3600)
    rs = f"{deploy}-{k8s_suffix(rng, 10)}"
    b.add(
        scheduler="kubernetes",
        kind="inference",
        submit=t,
        work=life,
        name=f"{rs}-{k8s_suffix(rng)}",
        user="system:serviceaccount",
        request="mig" if mig else "gpu",
        count=1,
        mig_slices=3 if mig else None,
        namespace=ns,
        model=model,
        model_via="label",
        owner_kind="ReplicaSet",
        owner_name=rs,
        owner_uid=new_uid(rng),
        util_base=float(rng.uniform(0.7, 1.0)),
    )


def _k8s_training(b: _Builder, t: int, opening: bool = False) -> None:
    rng = b.rng
    ns, model = b.pick([(0.6, ("llm-train", "llama-8b")), (0.4, ("vision", "vit-b"))])
    work = int(np.clip(rng.lognormal(math.log(1.5 * 3600), 0.5), 1200, 8 * 3600))
    every = int(rng.choice([900, 1200, 1800]))
    job = f"{'llm-ft' if ns == 'llm-train' else 'vision-train'}-{k8s_suffix(rng)}"
    b.add(
        scheduler="kubernetes",
        kind="training",
        submit=t,
        work=_long(b) if opening else work,
        name=job,
        user=f"{ns.split('-')[0]}01",
        request="gpu",
        count=2 if opening else int(rng.choice([2, 4, 4])),
        namespace=ns,
        model=model,
        model_via="label",
        owner_kind="Job",
        owner_name=job,
        owner_uid=new_uid(rng),
        checkpoint_every=_opening_every(b) if opening else every,
        checkpoint_bytes=CHECKPOINT_BYTES[model],
        util_base=float(rng.uniform(0.8, 0.95)),
    )


def _k8s_batch(b: _Builder, t: int, work: int | None = None) -> None:
    rng = b.rng
    options: list[tuple[float, tuple[str, str | None, str | None]]] = [
        (0.45, ("recsys", "dlrm-v2", None)),
        (0.2, (UNMAPPED_NAMESPACE, None, None)),
        (0.15, (UNMAPPED_NAMESPACE, "e5-large", "search")),
        (0.2, ("vision", None, None)),
    ]
    ns, model, team = b.pick(options)
    requests: list[tuple[float, tuple[str, int | None]]] = [
        (0.6, ("gpu", None)),
        (0.25, ("mig", 2)),
        (0.15, ("mig", 3)),
    ]
    req, slices = b.pick(requests)
    if work is not None:
        req, slices = "gpu", None
    job = f"{ns.split('-')[0]}-batch-{k8s_suffix(rng)}"
    b.add(
        scheduler="kubernetes",
        kind="batch",
        submit=t,
        work=work or _loguniform(rng, 600, 3600),
        name=job,
        user=f"{team or ns.split('-')[0]}02",
        request=req,
        count=1,
        mig_slices=slices,
        namespace=ns,
        team_label=team,
        model=model,
        model_via="label" if model else "none",
        owner_kind="Job",
        owner_name=job,
        owner_uid=new_uid(rng),
        util_base=float(rng.uniform(0.5, 0.9)),
    )


def _k8s_notebook(b: _Builder, t: int) -> None:
    rng = b.rng
    options: list[tuple[float, tuple[str, str | None]]] = [
        (0.35, ("notebooks", None)),
        (0.2, ("notebooks", "llm")),
        (0.15, ("notebooks", "search")),
        (0.3, (UNMAPPED_NAMESPACE, None)),
    ]
    ns, team = b.pick(options)
    user = f"{team or ('vision' if ns == 'notebooks' else 'guest')}{int(rng.integers(1, 9)):02d}"
    shared = rng.random() < 0.6
    model = "llama-8b" if team == "llm" and rng.random() < 0.5 else None
    b.add(
        scheduler="kubernetes",
        kind="notebook",
        submit=t,
        work=_loguniform(rng, 1800, 4 * 3600),
        name=f"jupyter-{user}-{k8s_suffix(rng, 4)}",
        user=user,
        request="shared" if shared else "mig",
        count=1,
        mig_slices=None if shared else 1,
        namespace=ns,
        team_label=team,
        model=model,
        model_via="label" if model else "none",
        util_base=float(rng.uniform(0.02, 0.1)),
    )


def _kubernetes(b: _Builder, nodes: list[Node]) -> None:
    n, horizon = len(nodes), b.cfg.horizon
    for _ in range(int(1.5 * n)):
        _k8s_inference(b, int(b.rng.uniform(0, min(600, horizon / 4))), initial=True)
    kinds = [
        (0.04, lambda t: _k8s_inference(b, t, initial=False)),
        (0.25, lambda t: _k8s_training(b, t)),
        (2.0, lambda t: _k8s_batch(b, t)),
        (1.5, lambda t: _k8s_notebook(b, t)),
    ]
    for rate, make in kinds:
        for t in _arrivals(b.rng, rate * n, horizon):
            make(t)
    for i, t in enumerate(_opening(b, 8)):
        if i < 2:
            _k8s_batch(b, t, work=_long(b))
            b.specs[-1].unforced = True
        elif i == 2:
            _k8s_training(b, t, opening=True)
        else:
            (_k8s_batch if i < 6 else _k8s_notebook)(b, t)
    if any(node.sharing == sharing.DRA for node in nodes):
        _k8s_shared_claim(b)


def _k8s_shared_claim(b: _Builder) -> None:
    """Modern sharing: three pods of one inference ReplicaSet hold the DRA node's shared GPU through
    one claim, joining and leaving so that one, two, three and again two pods hold it."""
    rng, horizon = b.rng, b.cfg.horizon
    rs = f"llama-8b-shared-{k8s_suffix(rng, 10)}"
    uid = new_uid(rng)
    for joins, life in ((0.0, 2.0), (0.2, 0.45), (0.35, 2.0)):
        b.add(
            scheduler="kubernetes",
            kind="inference",
            submit=int(joins * horizon) + int(rng.integers(0, 60)),
            work=int(life * horizon),
            name=f"{rs}-{k8s_suffix(rng)}",
            user="system:serviceaccount",
            request="claim",
            count=1,
            namespace="llm-serve",
            model="llama-8b",
            model_via="label",
            owner_kind="ReplicaSet",
            owner_name=rs,
            owner_uid=uid,
            util_base=float(rng.uniform(0.2, 0.4)),
        )


def _opening(b: _Builder, n: int) -> list[int]:
    """A few extra arrivals early in the window, so that short windows see every failure class
    (each class is forced once per scheduler on an attempt that can still fail inside the window)."""
    return sorted(int(t) for t in b.rng.uniform(0, min(b.cfg.horizon / 8, 1800), n))


def _opening_every(b: _Builder) -> int:
    """Checkpoint interval of the opening training jobs: several checkpoints fit the window."""
    return max(300, min(1800, b.cfg.horizon // 16))


def _long(b: _Builder) -> int:
    return int(min(b.rng.uniform(0.5, 0.9) * b.cfg.horizon, 4 * 3600))


# ------------------------------------------------------------------------------------------
# Slurm
# ------------------------------------------------------------------------------------------
def _slurm_training(b: _Builder, t: int, nodes: list[Node], opening: bool = False) -> None:
    rng = b.rng
    types = sorted({n.model.short for n in nodes})
    gtype = types[int(rng.integers(0, len(types)))]
    same = sum(1 for n in nodes if n.model.short == gtype)
    n_nodes = 1 if opening else min(int(rng.choice([1, 1, 2, 2, 4])), same)
    gpus = 8 if n_nodes > 1 else (4 if opening else int(rng.choice([4, 8, 8])))
    work = _long(b) if opening else int(np.clip(rng.lognormal(math.log(2.5 * 3600), 0.6), 1800, 14 * 3600))
    every = _opening_every(b) if opening else int(rng.choice([1200, 1800, 2400]))
    account, model, via = b.pick(
        [(0.6, ("llm", str(rng.choice(["llama-70b", "llama-8b"])), "comment")), (0.4, ("vision", "vit-l", "wckey"))]
    )
    b.add(
        scheduler="slurm",
        kind="training",
        submit=t,
        work=work,
        name=f"{account}-pretrain",
        user=f"{account}01",
        request="gpu",
        count=gpus,
        nodes=n_nodes,
        gpu_type=gtype,
        account=account,
        partition="gpu",
        model=model,
        model_via=via,
        time_limit_min=int(math.ceil(work * 1.25 / 1800) * 30),
        checkpoint_every=every,
        checkpoint_bytes=CHECKPOINT_BYTES[model],
        util_base=float(rng.uniform(0.8, 0.95)),
    )


def _slurm_batch(b: _Builder, t: int, nodes: list[Node], work: int | None = None) -> None:
    rng = b.rng
    options: list[tuple[float, tuple[str, str | None, str]]] = [
        (0.4, ("recsys", "dlrm-v2", "comment")),
        (0.35, ("fraud", "xgb-fraud", "wckey")),
        (0.25, ("vision", None, "none")),
    ]
    account, model, via = b.pick(options)
    types = sorted({n.model.short for n in nodes})
    gtype = types[int(rng.integers(0, len(types)))] if rng.random() < 0.5 else None
    count = int(rng.choice([1, 1, 2, 4]))
    if work is None:
        work = _loguniform(rng, 600, 5400)
    else:
        count = 1
    b.add(
        scheduler="slurm",
        kind="batch",
        submit=t,
        work=work,
        name=f"{account}-batch",
        user=f"{account}02",
        request="gpu",
        count=count,
        gpu_type=gtype,
        account=account,
        partition="batch",
        model=model,
        model_via=via,
        time_limit_min=int(math.ceil(work * 1.5 / 900) * 15),
        util_base=float(rng.uniform(0.55, 0.9)),
    )


def acceptance_times(cfg: SimConfig) -> list[int]:
    """Offsets of the nightly NCCL acceptance runs inside the window."""
    first_day = floor_day(cfg.start)
    out = []
    for day in range(int(cfg.horizon // 86400) + 2):
        offset = int((first_day - cfg.start).total_seconds()) + day * 86400 + NIGHTLY_HOUR * 3600
        if offset > 0 and offset + RESERVATION_S + 300 < cfg.horizon:
            out.append(offset)
    if not out:  # no night in the window: one run shortly before its end
        out.append(max((cfg.horizon - RESERVATION_S - 600) // 60 * 60, 60))
    return out


def node_sets(nodes: list[Node]) -> list[list[Node]]:
    sets = [nodes[i : i + 4] for i in range(0, len(nodes), 4)]
    if len(sets) > 1 and len(sets[-1]) == 1:
        sets[-2].extend(sets.pop())
    return sets


def _acceptance(b: _Builder, nodes: list[Node]) -> None:
    for t in acceptance_times(b.cfg):
        for group in node_sets(nodes):
            b.add(
                scheduler="slurm",
                kind="benchmark",
                submit=max(t - 120, 0),
                work=int(b.rng.integers(240, 420)),
                name="nccl-acceptance",
                user="svc-acceptance",
                request="gpu",
                count=8,
                nodes=len(group),
                account="platform",
                partition="maint",
                time_limit_min=15,
                reservation=(t, t + RESERVATION_S),
                pinned_nodes=tuple(n.name for n in group),
                util_base=0.97,
            )


def _slurm(b: _Builder, nodes: list[Node]) -> None:
    n = len(nodes)
    for t in _arrivals(b.rng, 0.18 * n, b.cfg.horizon):
        _slurm_training(b, t, nodes)
    for t in _arrivals(b.rng, 1.6 * n, b.cfg.horizon):
        _slurm_batch(b, t, nodes)
    first = len(b.specs)
    for i, t in enumerate(_opening(b, 9)):
        if i == 0:
            _slurm_training(b, t, nodes, opening=True)
        else:
            _slurm_batch(b, t, nodes, work=_long(b) if i < 3 else _loguniform(b.rng, 300, 1200))
            b.specs[-1].unforced = i < 3
    for spec in b.specs[first:]:
        _before_reservation(spec, acceptance_times(b.cfg)[0])
    _acceptance(b, nodes)


def _before_reservation(spec: JobSpec, reserved_from: int) -> None:
    """Shorten an opening job so that its time limit ends before the first acceptance window
    (with half an hour to spare for queueing; otherwise it could only start after it, and a short
    window would see little Slurm work)."""
    per_minute = 1.25 if spec.kind == "training" else 1.5
    quantum = 30 if spec.kind == "training" else 15
    while spec.work > 600 and spec.submit + (spec.time_limit_min or 0) * 60 + 1800 > reserved_from:
        spec.work = int(spec.work * 0.9)
        spec.time_limit_min = int(math.ceil(spec.work * per_minute / (quantum * 60)) * quantum)


def generate(cfg: SimConfig, cluster: Cluster, rng: np.random.Generator) -> list[JobSpec]:
    """Every job submitted in the window, Slurm ids assigned in submission order."""
    b = _Builder(cfg, cluster, rng)
    _kubernetes(b, cluster.by_scheduler("kubernetes"))
    _slurm(b, cluster.by_scheduler("slurm"))
    specs = sorted(b.specs, key=lambda s: (s.submit, s.seq))
    next_id = FIRST_SLURM_ID
    for spec in specs:
        if spec.scheduler == "slurm":
            spec.slurm_id = next_id
            next_id += 1
    return specs
