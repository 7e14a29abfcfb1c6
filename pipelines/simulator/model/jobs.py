"""What runs on the cluster: job specifications, their attempts and the slots each attempt holds.

A :class:`JobSpec` is one logical job as submitted (a Slurm job id, a Kubernetes Job, a
ReplicaSet pod, a notebook pod). Each run of it is an :class:`Attempt` with scheduler times in
integer simulation seconds: ``start`` (allocation start: Slurm ``time.start``, pod
``status.startTime``, or the previous run's end for an in-pod container restart), ``run_start``
(the workload begins; before it the GPUs are held but idle) and ``end`` (``None`` while running
at the end of the window). :class:`SimState` is what the scheduler hands on: every job, every
attempt, and the fatal-XID intervals (:class:`XidInterval`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipelines.simulator.model.cluster import Slot


@dataclass
class JobSpec:
    seq: int
    scheduler: str  # "kubernetes" | "slurm"
    kind: str  # training | inference | notebook | batch | benchmark
    submit: int
    work: int  # planned run time in seconds (lifetime for inference/notebook pods)
    name: str
    user: str
    request: str  # "gpu" | "mig" | "shared" | "claim" (a seat of a shared DRA claim)
    count: int  # GPUs (or instances / replicas) per node
    nodes: int = 1
    mig_slices: int | None = None
    mig_profile: str | None = None  # the MIG profile requested (nvidia.com/mig-<profile>)
    gpu_type: str | None = None  # GpuModel.short required (Slurm typed GRES), or None
    namespace: str | None = None
    account: str | None = None
    partition: str | None = None
    team_label: str | None = None
    model: str | None = None
    model_via: str = "none"  # "label" | "comment" | "wckey" | "none"
    owner_kind: str | None = None  # Kubernetes: "Job" | "ReplicaSet" | None (bare pod)
    owner_name: str | None = None
    owner_uid: str | None = None
    time_limit_min: int | None = None  # Slurm time limit
    checkpoint_every: int | None = None
    checkpoint_bytes: int = 0
    util_base: float = 0.5
    reservation: tuple[int, int] | None = None  # NCCL acceptance window it must run in
    pinned_nodes: tuple[str, ...] = ()
    slurm_id: int | None = None
    attempts: list[Attempt] = field(default_factory=list)
    progress: int = 0  # work already safe in a checkpoint
    unforced: bool = False  # never fails by itself (left for a node failure to hit)
    dropped: bool = False  # never ran and is not pending (an acceptance run whose nodes were down)
    pending_pod: Pod | None = None  # Kubernetes: the pod waiting to be scheduled

    @property
    def gpus_requested(self) -> float:
        per = {"gpu": 1.0, "mig": (self.mig_slices or 0) / 7.0, "shared": 0.25, "claim": 1.0}[self.request]
        return per * self.count * self.nodes


@dataclass
class Checkpoint:
    kind: str  # "write" | "restore"
    started: int
    finished: int
    bytes: int
    node: str
    path: str


@dataclass
class Pod:
    name: str
    uid: str
    created: int
    scheduled: int | None = None
    node: str | None = None
    deleted: int | None = None  # DELETED event time
    deletion_ts: int | None = None  # metadata.deletionTimestamp
    phase_reason: str | None = None  # status.reason of a failed pod
    disruption: int | None = None  # DisruptionTarget condition time (preemption)
    restart_policy: str = "Never"
    active_deadline: int | None = None


@dataclass
class Attempt:
    spec: JobSpec
    number: int
    job_id: str
    logical_job: str
    submit: int
    start: int
    run_start: int
    slots: list[Slot]
    planned_end: int
    eligible: int | None = None  # Slurm: when a requeued job may start again
    planned_reason: str | None = None  # the drawn fate, applied when the end is reached
    forced: bool = False  # the fate was forced to guarantee a failure class
    end: int | None = None
    reason: str | None = None  # failure class, None for success / still running
    xid_gpu: str | None = None  # uuid of the GPU whose fatal XID ended it
    xid_time: int | None = None
    checkpoints: list[Checkpoint] = field(default_factory=list)
    pod: Pod | None = None
    restart_index: int = 0  # container restarts before this run in the same pod
    version: int = 0  # bumps when the planned end changes (lazy event invalidation)

    @property
    def nodes(self) -> list[str]:
        seen: list[str] = []
        for slot in self.slots:
            if slot.gpu.node not in seen:
                seen.append(slot.gpu.node)
        return seen

    @property
    def outcome(self) -> str:
        if self.end is None:
            return "running"
        return "failure" if self.reason else "success"

    def last_checkpoint(self) -> int | None:
        """Finish time of the last completed checkpoint write, if any."""
        done = [c.finished for c in self.checkpoints if c.kind == "write"]
        return max(done) if done else None


@dataclass(frozen=True)
class XidInterval:
    gpu: str  # uuid
    node: str
    at: int  # first sample showing XID 79
    repaired: int  # first sample showing 0 again


@dataclass
class SimState:
    specs: list[JobSpec]
    attempts: list[Attempt]
    xids: list[XidInterval]
