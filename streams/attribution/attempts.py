"""Job attempt facts from placement snapshots and checkpoints (pure).

An attempt is one run of a logical job (docs/ATTRIBUTION.md "Attempts and failure waste"). Its
placements (one per node) carry the same times and outcome; the attempt's GPU-seconds are the sum
over its placements of GPU equivalents × held time, a replica counted 1/N with N the node's replicas
per GPU in force (``NodeReplicas``, effective-dated from its node states, as the attribution counts
it). Devices held through DRA claims count whole here: their split among the placements sharing a
claim is the facts' (an attempt record is never less than its facts). Lost work: with a completed
checkpoint (``finished``) inside the attempt, only the GPU-seconds after the last one are lost.

An attempt without an end record ends when a later attempt of the same job starts
(:func:`end_superseded`): a requeue whose first record ``sacct`` never returned, a retry seen after
a collector restart. It ends in failure (``unknown``): its GPU-seconds are failure waste.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from pipelines.events import AllocationData
from streams.attribution.resolve import model_of

# node -> the replicas per GPU its node states declare, as ascending (epoch seconds, replicas) changes
NodeReplicas = Mapping[str, Sequence[tuple[float, int]]]


@dataclass(frozen=True)
class Checkpoint:
    job_id: str
    attempt: int | None
    finished: datetime


@dataclass(frozen=True)
class AttemptFact:
    scheduler: str
    job_id: str
    attempt: int
    logical_job: str
    job_name: str
    state: str
    submit_time: datetime | None
    start_time: datetime | None
    end_time: datetime | None
    outcome: str  # success | failure | running | pending
    failure_reason: str
    exit_code: int | None
    scheduler_state: str
    nodes: tuple[str, ...]
    requested_gpus: float
    gpu_seconds: float
    queue_seconds: float | None
    queue_gpu_seconds: float | None
    last_checkpoint: datetime | None
    lost_gpu_seconds: float
    namespace: str
    account: str
    user: str
    queue: str
    workload_kind: str
    team_label: str
    model: str


_STATE_RANK = {"pending": 0, "running": 1, "ended": 2}
SUPERSEDED = "superseded"  # scheduler_state of an attempt ended by the start of a later one

AttemptKey = tuple[str, str, int]  # scheduler, job id, attempt


def next_starts(starts: Iterable[tuple[str, str, int, datetime]]) -> dict[AttemptKey, datetime]:
    """Per attempt, the earliest start of any later attempt of the same job."""
    by_job: dict[tuple[str, str], dict[int, datetime]] = {}
    for scheduler, job_id, attempt, start in starts:
        job = by_job.setdefault((scheduler, job_id), {})
        job[attempt] = min(start, job.get(attempt, start))
    out: dict[AttemptKey, datetime] = {}
    for (scheduler, job_id), attempts in by_job.items():
        later: datetime | None = None
        for attempt in sorted(attempts, reverse=True):
            if later is not None:
                out[(scheduler, job_id, attempt)] = later
            later = attempts[attempt] if later is None else min(later, attempts[attempt])
    return out


def end_superseded(p: AllocationData, next_start: datetime | None) -> AllocationData:
    """``p`` ended at ``next_start`` when it has no end of its own and a later attempt started."""
    if p.state == "ended" or next_start is None or p.start_time is None:
        return p
    return p.model_copy(
        update={
            "state": "ended",
            "end_time": max(next_start, p.start_time),
            "outcome": "failure",
            "failure_reason": "unknown",
            "scheduler_state": SUPERSEDED,
        }
    )


def latest(snapshots: Sequence[tuple[datetime, AllocationData]]) -> AllocationData:
    """The snapshot that wins: furthest state, then latest event time."""
    return max(snapshots, key=lambda s: (_STATE_RANK[s[1].state], s[0]))[1]


def attempt_fact(
    placements: Sequence[AllocationData],
    job_level: AllocationData | None,
    checkpoints: Sequence[Checkpoint],
    previous_end: datetime | None,
    replicas: NodeReplicas | None = None,
) -> AttemptFact:
    """One attempt from its latest per-node placements (possibly none yet) and job-level event;
    ``replicas``: the replicas per GPU of its nodes over time."""
    replicas = replicas or {}
    ref = placements[0] if placements else job_level
    if ref is None:
        raise ValueError("an attempt needs a placement or a job-level event")
    submit = min(
        (p.submit_time for p in [*placements, *([job_level] if job_level else [])] if p.submit_time), default=None
    )
    starts = [p.start_time for p in placements if p.start_time]
    start = min(starts) if starts else None
    ended = placements and all(p.state == "ended" for p in placements)
    end = max(p.end_time for p in placements if p.end_time) if ended else None
    failed = next((p for p in placements if p.outcome == "failure"), None)
    outcome = ("failure" if failed else "success") if ended else ("running" if placements else "pending")
    gpu_seconds = 0.0
    if ended:
        gpu_seconds = sum(_gpu_seconds(p, p.start_time, replicas) for p in placements)
    queue_from = previous_end if ref.attempt > 1 and previous_end else submit
    queue_s = (start - queue_from).total_seconds() if start and queue_from else None
    requested = max([p.requested_gpus for p in placements] + [job_level.requested_gpus if job_level else 0.0])
    requested = requested or sum(
        p.gpu_equivalents_on(_replicas_at(replicas.get(p.node or "", ()), _epoch(p.start_time))) for p in placements
    )
    last_ckpt = _last_checkpoint(checkpoints, ref.attempt, start, end)
    lost = 0.0
    if outcome == "failure" and end is not None:
        for p in placements:
            since = max(p.start_time, last_ckpt) if last_ckpt and p.start_time else p.start_time
            lost += _gpu_seconds(p, since, replicas)
    final = failed or ref
    return AttemptFact(
        scheduler=ref.scheduler,
        job_id=ref.job_id,
        attempt=ref.attempt,
        logical_job=ref.logical_job or ref.job_id,
        job_name=ref.job_name or "",
        state="ended" if ended else ref.state,
        submit_time=submit,
        start_time=start,
        end_time=end,
        outcome=outcome,
        failure_reason=(failed.failure_reason or "unknown") if failed else "",
        exit_code=final.exit_code,
        scheduler_state=final.scheduler_state or "",
        nodes=tuple(sorted({p.node for p in placements if p.node})),
        requested_gpus=requested,
        gpu_seconds=gpu_seconds,
        queue_seconds=queue_s,
        queue_gpu_seconds=queue_s * requested if queue_s is not None else None,
        last_checkpoint=last_ckpt,
        lost_gpu_seconds=lost,
        namespace=ref.owner.namespace or "",
        account=ref.owner.account or "",
        user=ref.owner.user or "",
        queue=ref.owner.queue or "",
        workload_kind=ref.owner.workload_kind,
        team_label=ref.owner.labels.get("team", ""),
        model=model_of(ref),
    )


def _gpu_seconds(p: AllocationData, since: datetime | None, replicas: NodeReplicas) -> float:
    """GPU equivalents × held time of ``p`` from ``since`` to its end, with its node's replicas in force."""
    if since is None or p.end_time is None:
        return 0.0
    a, b = since.timestamp(), p.end_time.timestamp()
    changes = [c for c in replicas.get(p.node or "", ()) if a < c[0] < b]
    total, at, n = 0.0, a, _replicas_at(replicas.get(p.node or "", ()), a)
    for t, replicas_then in changes:
        total += p.gpu_equivalents_on(n) * (t - at)
        at, n = t, replicas_then
    return total + p.gpu_equivalents_on(n) * max(b - at, 0.0)


def _replicas_at(changes: Sequence[tuple[float, int]], t: float | None) -> int | None:
    """The replicas in force at ``t``: the latest change at or before it (None before the first)."""
    n: int | None = None
    for when, replicas in changes:
        if t is None or when > t:
            break
        n = replicas
    return n


def _epoch(t: datetime | None) -> float | None:
    return t.timestamp() if t is not None else None


def _last_checkpoint(
    checkpoints: Sequence[Checkpoint], attempt: int, start: datetime | None, end: datetime | None
) -> datetime | None:
    if start is None or end is None:
        return None
    inside = [
        c.finished for c in checkpoints if (c.attempt is None or c.attempt == attempt) and start <= c.finished <= end
    ]
    return max(inside) if inside else None
