"""How attempts end: success, or one of the failure classes, and when.

Each attempt's fate is drawn when it starts (per scheduler and workload kind). Long-lived
restartable pods (inference, notebooks) fail by a per-hour hazard instead. Node failures are
planned up front: a fatal XID 79 on one whole GPU at a scrape time, repaired at a later scrape
time, so sample-based detection of the unavailable interval is exact. A failure prefers a GPU
with work on it; when none is busy at its time it waits for the next attempt to start on that
scheduler, and as a last chance (so that it still fits the window) takes a free GPU.

Every failure class the brief names is guaranteed at least once per scheduler when the window
allows it: the first attempts that fit get a forced fate (``Guarantee``), ending well inside the
window.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pipelines.simulator.config import SimConfig
from pipelines.simulator.model.cluster import Cluster
from pipelines.simulator.model.jobs import JobSpec

PER_ATTEMPT: dict[tuple[str, str], dict[str, float]] = {
    ("slurm", "training"): {"oom": 0.03, "app_error": 0.03, "preempted": 0.04, "timeout": 0.03, "cancelled": 0.02},
    ("slurm", "batch"): {"oom": 0.04, "app_error": 0.05, "preempted": 0.02, "timeout": 0.03, "cancelled": 0.03},
    ("kubernetes", "training"): {"oom": 0.03, "app_error": 0.03, "preempted": 0.04, "timeout": 0.02},
    ("kubernetes", "batch"): {"oom": 0.04, "app_error": 0.06, "preempted": 0.02},
}
PER_HOUR: dict[str, dict[str, float]] = {
    "inference": {"oom": 0.03, "app_error": 0.01},
    "notebook": {"oom": 0.04},
}
SLURM_STATE = {
    "oom": "OUT_OF_MEMORY",
    "app_error": "FAILED",
    "preempted": "PREEMPTED",
    "timeout": "TIMEOUT",
    "cancelled": "CANCELLED",
    "node_failure": "NODE_FAIL",
    None: "COMPLETED",
}
K8S_STATE = {
    "oom": "OOMKilled",
    "app_error": "Error",
    "preempted": "PreemptionByScheduler",
    "timeout": "DeadlineExceeded",
    "node_failure": "NodeLost",
    None: "Completed",
}
EXIT = {
    "oom": (137, 9),
    "app_error": (1, None),
    "preempted": (143, 15),
    "timeout": (137, 9),
    "cancelled": (0, 15),
    "node_failure": (0, 9),
    None: (0, None),
}


def scheduler_state(scheduler: str, reason: str | None, ended: bool) -> str:
    """The scheduler's own word for how an attempt ended (or that it is still running)."""
    if not ended:
        return "RUNNING" if scheduler == "slurm" else "Running"
    return (SLURM_STATE if scheduler == "slurm" else K8S_STATE)[reason]


def restartable(spec: JobSpec) -> bool:
    """Pods whose containers restart in place (ReplicaSet and notebook pods)."""
    return spec.scheduler == "kubernetes" and spec.kind in ("inference", "notebook")


@dataclass(frozen=True)
class Fate:
    reason: str | None
    end: int


@dataclass
class Guarantee:
    """Failure classes still owed per scheduler, with the specs that may carry each."""

    owed: dict[str, list[tuple[str, Callable[[JobSpec], bool]]]]

    @classmethod
    def default(cls, horizon: int) -> Guarantee:
        """Long jobs are left alone (they are what a node failure can hit later)."""

        def not_bench(s: JobSpec) -> bool:
            return s.kind != "benchmark" and s.work <= horizon // 3 and not s.unforced

        def job_pod(s: JobSpec) -> bool:
            return s.owner_kind == "Job" and s.work <= horizon // 3 and not s.unforced

        def checkpointed(s: JobSpec) -> bool:
            return s.kind == "training" and bool(s.checkpoint_every)

        owed: dict[str, list[tuple[str, Callable[[JobSpec], bool]]]] = {
            "slurm": [
                ("oom", checkpointed),
                *((r, not_bench) for r in ("oom", "app_error", "timeout", "preempted", "cancelled")),
            ],
            "kubernetes": [
                ("app_error", checkpointed),
                ("oom", restartable),
                ("app_error", job_pod),
                ("preempted", job_pod),
                ("timeout", lambda s: s.kind == "training" or job_pod(s)),
                ("oom", job_pod),
            ],
        }
        return cls(owed)

    def take(self, spec: JobSpec, run_start: int, remaining: int, horizon: int) -> str | None:
        """A failure class this attempt must carry, when it can end well inside the window."""
        if forced_span(run_start, remaining, horizon) < 60:
            return None
        owed = self.owed.get(spec.scheduler, [])
        for i, (reason, fits) in enumerate(owed):
            if fits(spec):
                owed.pop(i)
                return reason
        return None

    def owe(self, spec: JobSpec, reason: str) -> None:
        """A forced failure that a node failure pre-empted is owed again."""
        self.owed.setdefault(spec.scheduler, []).insert(0, (reason, lambda s: s.kind == spec.kind))


def forced_span(run_start: int, remaining: int, horizon: int) -> int:
    return min(remaining - 30, horizon - run_start - 120)


def draw_fate(
    spec: JobSpec, run_start: int, remaining: int, rng: np.random.Generator, horizon: int, forced: str | None
) -> Fate:
    """The attempt's fate (``forced``: a class from :class:`Guarantee` that fits the window)."""
    success_end = run_start + remaining
    if spec.unforced:
        return Fate(None, success_end)
    if forced is not None:
        span = forced_span(run_start, remaining, horizon)
        low = 0.2 * span
        if spec.checkpoint_every and spec.checkpoint_every + 240 < 0.8 * span:
            low = spec.checkpoint_every + 240  # after the first checkpoint: lost work < the attempt
        return Fate(forced, run_start + int(rng.uniform(low, 0.8 * span)))
    if spec.kind in PER_HOUR and spec.scheduler == "kubernetes":
        best: Fate | None = None
        for reason, per_hour in PER_HOUR[spec.kind].items():
            at = run_start + int(rng.exponential(3600.0 / per_hour))
            if at < success_end and (best is None or at < best.end):
                best = Fate(reason, max(at, run_start + 30))
        return best or Fate(None, success_end)
    table = PER_ATTEMPT.get((spec.scheduler, spec.kind), {})
    u = rng.random()
    for reason, p in table.items():
        if u < p:
            return Fate(reason, run_start + max(30, int(rng.uniform(0.05, 0.95) * remaining)))
        u -= p
    return Fate(None, success_end)


@dataclass(frozen=True)
class NodeFailure:
    scheduler: str
    node: str  # preferred node; another node of the scheduler if it has no busy GPU
    at: int  # on the scrape grid
    length: int  # a multiple of the scrape interval
    ident: int = 0
    last_chance: bool = False  # no busy GPU came along: take a free one

    @property
    def repaired(self) -> int:
        return self.at + self.length


def plan_node_failures(cfg: SimConfig, cluster: Cluster, rng: np.random.Generator) -> list[NodeFailure]:
    """One or more fatal-XID failures per scheduler, at and repaired at scrape times."""
    step, horizon = cfg.scrape_interval_s, cfg.horizon
    out: list[NodeFailure] = []
    for offset, scheduler in ((0.0, "kubernetes"), (0.05, "slurm")):
        nodes = cluster.by_scheduler(scheduler)
        count = 1 + len(nodes) // 6
        chosen = rng.choice(len(nodes), size=min(count, len(nodes)), replace=False)
        for i, node_index in enumerate(sorted(int(c) for c in chosen)):
            frac = 0.2 + offset + 0.4 * i / count
            at = int(horizon * frac) // step * step
            length = max(int(horizon * rng.uniform(0.08, 0.15)) // step * step, 6 * step)
            out.append(NodeFailure(scheduler, nodes[node_index].name, at, length, ident=len(out)))
    return out
