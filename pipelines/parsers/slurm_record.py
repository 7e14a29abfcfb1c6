"""One Slurm job record (``sacct --json`` or ``squeue --json``), read into plain values and classified.

Field names differ between the two commands; both spellings are read:

=============  ===============================  ===================================
what           sacct                            squeue
=============  ===============================  ===================================
state          ``state.current`` (+``reason``)  ``job_state`` (+``state_reason``)
times          ``time.submission/start/end``    ``submit_time/start_time/end_time``
user           ``user``                         ``user_name``
array          ``array.job_id/task_id``         ``array_job_id/array_task_id``
GPUs           ``tres.allocated/requested``     ``tres_alloc_str/tres_req_str``
=============  ===============================  ===================================

Times are only trusted where they are facts: ``squeue`` prints the *expected* start of a pending
job and the *expected* end (start + limit) of a running one, so a start is read only for a job
that runs or ran, and an end only for a job that ended.

State -> outcome (docs/ATTRIBUTION.md): COMPLETED success; FAILED app_error; OUT_OF_MEMORY oom;
NODE_FAIL and BOOT_FAIL node_failure; PREEMPTED preempted; TIMEOUT and DEADLINE timeout;
CANCELLED cancelled. An attempt ended by a requeue (``REQUEUED`` with an end time, as ``sacct -D``
lists it) is node_failure when the reason names a node failure, preempted when it names
preemption, else unknown. PENDING gives no placement; RUNNING (and SUSPENDED, COMPLETING, …)
running placements.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pipelines.parsers import slurm_fields as f
from pipelines.parsers.hostlist import expand
from pipelines.parsers.sched_events import as_dict

TERMINAL: dict[str, tuple[str, str | None]] = {
    "COMPLETED": ("success", None),
    "FAILED": ("failure", "app_error"),
    "OUT_OF_MEMORY": ("failure", "oom"),
    "NODE_FAIL": ("failure", "node_failure"),
    "BOOT_FAIL": ("failure", "node_failure"),
    "PREEMPTED": ("failure", "preempted"),
    "TIMEOUT": ("failure", "timeout"),
    "DEADLINE": ("failure", "timeout"),
    "CANCELLED": ("failure", "cancelled"),
}
ACTIVE = frozenset(
    {
        "RUNNING",
        "SUSPENDED",
        "COMPLETING",
        "CONFIGURING",
        "SIGNALING",
        "STAGE_OUT",
        "RESIZING",
        "STOPPED",
        "POWER_UP_NODE",
    }
)
WAITING = frozenset({"PENDING", "REQUEUE_HOLD", "REQUEUE_FED", "SPECIAL_EXIT", "RESV_DEL_HOLD", "REVOKED"})


@dataclass(frozen=True)
class Classified:
    phase: str  # "pending" | "running" | "ended"
    scheduler_state: str
    outcome: str | None = None
    failure_reason: str | None = None


@dataclass(frozen=True)
class JobRecord:
    job_id: str
    restart_cnt: int
    unique_id: str  # SLURM_JOB_ID: differs from job_id for an array task (dcgm-exporter's hpc_job)
    name: str | None
    account: str | None
    user: str | None
    partition: str | None
    comment: str | None
    wckey: str | None
    states: tuple[str, ...]
    reason: str | None
    submit: datetime | None
    start: datetime | None
    end: datetime | None
    nodes: list[str]
    alloc_gpus: int
    req_gpus: int
    gpu_type: str | None
    gres: list[f.NodeGres] | None
    exit_code: int | None
    signal: int | None
    from_squeue: bool  # squeue's start/end of a non-finished job are expectations, not facts


def job_identity(job: dict[str, Any]) -> tuple[str, int]:
    """``(job_id, restart_cnt)``: array tasks as ``<array job>_<task>``, pending arrays ``_[1-9]``.

    A pending remainder of exactly one task (``array_task_string`` ``2``, ``[2]`` or ``2%1`` with a
    throttle) is that task: ``<array job>_2``, the id it has once it starts (the last task of an array
    runs in the array's own record, so its SLURM_JOB_ID stays the record's ``job_id``)."""
    array = as_dict(job.get("array"))
    base = f.integer(job.get("job_id"))
    if base is None:
        raise ValueError("job without job_id")
    array_job = f.integer(array.get("job_id", job.get("array_job_id")))
    task = f.integer(array.get("task_id", job.get("array_task_id")))
    task_range = f.text(array.get("task", job.get("array_task_string")))
    if array_job and task is not None:
        job_id = f"{array_job}_{task}"
    elif array_job and task_range:
        remainder = task_range.split("%", 1)[0].strip("[]")
        job_id = f"{array_job}_{remainder}" if remainder.isdecimal() else f"{array_job}_[{remainder}]"
    else:
        job_id = str(base)
    restarts = f.integer(job.get("restart_cnt")) or 0
    if restarts < 0:
        raise ValueError(f"negative restart_cnt {restarts}")
    return job_id, restarts


def read_record(job: dict[str, Any]) -> JobRecord:
    """Read the fields gpuledger needs from one job record of either command."""
    job_id, restarts = job_identity(job)
    unique_id = str(f.integer(job.get("job_id")))
    state_obj = job.get("state")
    if isinstance(state_obj, dict):
        states, reason = f.states(state_obj.get("current")), f.text(state_obj.get("reason"))
    else:
        states, reason = f.states(job.get("job_state", state_obj)), f.text(job.get("state_reason"))
    times = as_dict(job.get("time"))
    alloc, alloc_type = f.gpu_tres(_tres(job, "allocated", "tres_alloc_str"))
    req, req_type = f.gpu_tres(_tres(job, "requested", "tres_req_str"))
    if req == 0:  # squeue of some versions states the GPU request only per job or per node
        per_node = f.gpu_per_spec(job.get("tres_per_node")) * (f.integer(job.get("node_count")) or 1)
        req = f.gpu_per_spec(job.get("tres_per_job")) or per_node
    exit_code, signal = f.exit_info(job.get("exit_code"))
    association = as_dict(job.get("association"))
    return JobRecord(
        job_id=job_id,
        restart_cnt=restarts,
        unique_id=unique_id,
        name=f.text(job.get("name")),
        account=f.text(job.get("account")) or f.text(association.get("account")),
        user=f.text(job.get("user", job.get("user_name"))) or f.text(association.get("user")),
        partition=f.text(job.get("partition")),
        comment=f.comment(job.get("comment")),
        wckey=f.wckey(job.get("wckey")),
        states=states,
        reason=reason,
        submit=f.epoch(times.get("submission", times.get("submit", job.get("submit_time")))),
        start=f.epoch(times.get("start", job.get("start_time"))),
        end=f.epoch(times.get("end", job.get("end_time"))),
        nodes=_nodes(job),
        alloc_gpus=alloc,
        req_gpus=req,
        gpu_type=alloc_type or req_type,
        gres=f.gres_detail(job.get("gres_detail")),
        exit_code=exit_code,
        signal=signal,
        from_squeue=not isinstance(state_obj, dict),
    )


def _tres(job: dict[str, Any], kind: str, string_key: str) -> Any:
    tres = job.get("tres")
    if isinstance(tres, dict) and tres.get(kind) not in (None, []):
        return tres.get(kind)
    return job.get(string_key)


def _nodes(job: dict[str, Any]) -> list[str]:
    hostlist = f.text(job.get("nodes"))
    if hostlist is None:
        resources = job.get("job_resources")
        if isinstance(resources, dict):
            inner = resources.get("nodes")
            hostlist = f.text(inner.get("list") if isinstance(inner, dict) else inner)
    if hostlist is None:
        return []
    return list(dict.fromkeys(expand(hostlist)))  # de-duplicated, order kept


def classify(record: JobRecord) -> Classified:
    """The job's phase and, once ended, its outcome and failure class."""
    words = record.states
    for word in words:
        if word in TERMINAL:
            outcome, reason = TERMINAL[word]
            return Classified("ended", word, outcome, reason)
    active = any(word in ACTIVE for word in words)
    if "REQUEUED" in words and not active and not record.from_squeue and record.end and record.start:
        return Classified("ended", "REQUEUED", "failure", requeue_reason(record))
    if active:
        return Classified("running", "RUNNING")
    if any(word in WAITING for word in words) or "REQUEUED" in words:
        return Classified("pending", "PENDING")
    raise ValueError(f"unknown job state {'+'.join(words)[:60]!r}")


def requeue_reason(record: JobRecord) -> str:
    """Why a requeued attempt ended, from the state reason and flags."""
    clue = " ".join([record.reason or "", *record.states]).lower().replace("_", " ")
    if "preempt" in clue:
        return "preempted"
    if "node" in clue and any(word in clue for word in ("fail", "down", "lost", "unresponsive")):
        return "node_failure"
    return "unknown"
