"""Event contracts: the one wire schema shared by collectors, stream workers and the warehouse.

Every Kafka message is an :class:`Envelope` serialised as UTF-8 JSON::

    {"id": "…", "source": "dcgm", "type": "gpu.sample", "schema_version": 1,
     "time": "2026-11-02T10:00:00Z", "cluster": "c1", "data": {…}}

* ``id`` is derived from the natural key of what the event describes (:func:`event_id`), never
  random: a re-scrape, a re-ingest of the same file or a replay produces the same id, and every
  sink deduplicates on it.
* ``time`` is event time in UTC (naive datetimes are rejected, offsets are normalised to UTC).
* ``data`` is typed per event ``type``; :data:`EVENT_MODELS` maps each type to its envelope class
  and :func:`pipelines.wire.decode` validates raw bytes into the right one.

``gpu.sample`` (topic ``gpu.metrics``) has three schema versions, all accepted forever so that old
logs replay into the same rows (docs/WIRE.md):

* **1** — ``data = {"node", "interval_s", "gpus": [GpuSample, …]}``: one object per GPU or MIG
  instance (:class:`GpuMetricsData`), validated per sample.
* **2** — columns: ``data = {"node", "interval_s", "uuid": [...], "index": [...], …}``, one array
  per :class:`GpuSample` field (``null`` = missing, an absent array = all missing), validated per
  message on the arrays (:mod:`pipelines.gpu_columns`). Collectors publish it; ``data.gpus`` of a
  decoded version 2 event still reads as :class:`GpuSample` rows.
* **3** — several scrapes of one node: the arrays of version 2 plus ``offset_us``, each row's time
  after the event's (:mod:`pipelines.gpu_columns`); what the ``query_range`` collector sends.

Versions 1 and 2 of one scrape carry the same id (``event_id("gpu.sample", cluster, node, time)``),
so sinks deduplicate them to one; every version of a scrape gives the same warehouse rows.

Topic of each type: see :data:`TOPIC_OF_TYPE`.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import orjson
from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from pipelines import topics
from pipelines.times import as_utc

SCHEMA_VERSION = 1


UtcDatetime = Annotated[AwareDatetime, AfterValidator(as_utc)]
Ratio = Annotated[float, Field(ge=0.0, le=1.0)]
NonNegative = Annotated[float, Field(ge=0.0)]

Source = Literal[
    "dcgm", "kubernetes", "slurm", "storage", "nccl", "org", "pricing", "checkpoint", "outputs", "gpuledger"
]
WorkloadKind = Literal["training", "inference", "notebook", "batch", "benchmark", "unknown"]
FailureReason = Literal["oom", "node_failure", "gpu_error", "preempted", "timeout", "app_error", "cancelled", "unknown"]
Outcome = Literal["success", "failure"]


def event_id(*parts: object) -> str:
    """A deterministic id from the natural key of an event (32 hex chars of SHA-256)."""
    text = "\x1f".join("" if p is None else (p.isoformat() if isinstance(p, datetime) else str(p)) for p in parts)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --------------------------------------------------------------------------------------------
# gpu.metrics — a node's scrape(s), carrying every GPU (and MIG instance) of it
# --------------------------------------------------------------------------------------------
class GpuSample(_Model):
    """One GPU, or one MIG instance of it, at one sample time.

    Utilisation fields are ratios 0–1 (dcgm-exporter's percent ``DCGM_FI_DEV_GPU_UTIL`` is divided
    by 100 by the parser). ``None`` means the series was absent or held a blank sentinel.
    """

    uuid: str  # physical GPU UUID ("GPU-…"); for a MIG instance the parent GPU's UUID
    index: int | None = None  # the `gpu` label (device minor number)
    model: str | None = None  # modelName, e.g. "NVIDIA H100 80GB HBM3"
    mig_profile: str | None = None  # GPU_I_PROFILE, e.g. "3g.40gb"
    mig_instance: int | None = None  # GPU_I_ID
    gr_engine_active: Ratio | None = None  # DCGM_FI_PROF_GR_ENGINE_ACTIVE
    gpu_util: Ratio | None = None  # DCGM_FI_DEV_GPU_UTIL / 100 (absent on MIG instances)
    sm_active: Ratio | None = None
    tensor_active: Ratio | None = None
    dram_active: Ratio | None = None
    fb_used_mib: NonNegative | None = None
    fb_free_mib: NonNegative | None = None
    power_w: NonNegative | None = None
    energy_mj: NonNegative | None = None  # DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter (mJ)
    temperature_c: float | None = None
    xid: int | None = None  # DCGM_FI_DEV_XID_ERRORS: last XID seen (0 = none)
    namespace: str | None = None  # Kubernetes pod mapping labels
    pod: str | None = None
    container: str | None = None
    hpc_job: str | None = None  # Slurm job mapping label
    # a device shared by several pods (time slicing, a DRA claim reserved for several pods):
    # dcgm-exporter repeats its series once per pod; every ``<namespace>/<pod>`` it named, in input
    # order (``namespace``/``pod`` above are the first). Empty when at most one pod holds it.
    holders: list[str] = Field(default_factory=list)

    @property
    def slot(self) -> str:
        """Identity of the schedulable unit: the GPU, or ``<uuid>/mig<GPU_I_ID>``."""
        return self.uuid if self.mig_instance is None else f"{self.uuid}/mig{self.mig_instance}"

    @property
    def utilization(self) -> float | None:
        """Busy ratio by the design's preference: GR engine active, else GPU util."""
        return self.gr_engine_active if self.gr_engine_active is not None else self.gpu_util


class GpuMetricsData(_Model):
    node: str
    interval_s: float | None = Field(default=None, gt=0)  # scrape interval when known
    gpus: list[GpuSample]


# --------------------------------------------------------------------------------------------
# scheduler.allocations — attempt lifecycle per node placement, job submissions, node states
# --------------------------------------------------------------------------------------------
class GpuRequest(_Model):
    """What a placement holds on its node, as the scheduler states it."""

    kind: Literal["gpu", "mig", "shared"] = "gpu"
    count: int = Field(ge=0)
    gpu_type: str | None = None  # Slurm typed GRES ("h100") or a node label
    profile: str | None = None  # MIG profile "<g>g.<mem>gb" for kind == "mig"
    replicas: int | None = Field(default=None, ge=1)  # time-slicing replicas per GPU, kind == "shared"

    @property
    def gpu_equivalents(self) -> float:
        """Whole-GPU equivalents: MIG g/S of a GPU, a time-sliced replica 1/N."""
        if self.kind == "mig":
            return self.count * mig_fraction(self.profile, self.gpu_type)
        if self.kind == "shared":
            return self.count / (self.replicas or DEFAULT_REPLICAS)
        return float(self.count)


DEFAULT_REPLICAS = 4  # time-slicing replicas per GPU when no source states them (docs/ATTRIBUTION.md)
# Compute slices of a MIG-capable GPU by model family (NVIDIA MIG user guide): 7 on A100, H100,
# H200, B200; 4 on A30. Profiles that exist only on an A30 name it when the model is not known.
MIG_SLICES = {"A30": 4}
DEFAULT_MIG_SLICES = 7
_A30_PROFILES = frozenset({"1g.6gb", "2g.12gb", "4g.24gb"})


def mig_slices(profile: str | None, model: str | None = None) -> int:
    """Compute slices of the GPU a MIG instance of ``profile`` lives on (``model``: short key or modelName)."""
    if model:
        from pipelines.gpu_models import model_key

        key = model_key(model)
        if key in MIG_SLICES:
            return MIG_SLICES[key]
        if key != "unknown":
            return DEFAULT_MIG_SLICES
    base = (profile or "").split("+", 1)[0].lower()
    return MIG_SLICES["A30"] if base in _A30_PROFILES else DEFAULT_MIG_SLICES


def mig_fraction(profile: str | None, model: str | None = None) -> float:
    """Compute share of a MIG profile ``<g>g.<mem>gb`` (optionally ``+me``): g/S, S the model's slices."""
    if not profile or "g." not in profile:
        raise ValueError(f"not a MIG profile: {profile!r}")
    slices = int(profile.split("g.", 1)[0])
    total = mig_slices(profile, model)
    if not 1 <= slices <= total:
        raise ValueError(f"MIG profile with {slices} compute slices on a {total}-slice GPU: {profile!r}")
    return slices / float(total)


def is_replica_id(device_id: str) -> bool:
    """A time-sliced replica as the device plugin names it: ``<GPU id>::<k>``."""
    return "::" in device_id


class Owner(_Model):
    """Who a placement belongs to. Team / business unit / model are resolved downstream from
    labels and effective-dated org mappings, so they are not fixed here."""

    namespace: str | None = None  # Kubernetes namespace
    account: str | None = None  # Slurm account
    user: str | None = None
    queue: str | None = None  # Slurm partition or Kubernetes queue / priority class
    labels: dict[str, str] = Field(default_factory=dict)  # pod labels incl. `team`, `model`
    comment: str | None = None  # Slurm comment (may carry `model=<name>`)
    wckey: str | None = None
    workload_kind: WorkloadKind = "unknown"


class AllocationData(_Model):
    scheduler: Literal["kubernetes", "slurm"]
    job_id: str  # Slurm job id ("1234", "1234_7" for arrays); Kubernetes "<namespace>/<pod>"
    logical_job: str | None = None  # the job all attempts belong to (Kubernetes Job name, Slurm job id)
    job_name: str | None = None
    attempt: int = Field(default=1, ge=1)  # 1-based: requeues, restarts and retries count up
    node: str | None = None  # None for job-level events (submitted)
    state: Literal["pending", "running", "ended"]
    submit_time: UtcDatetime | None = None
    start_time: UtcDatetime | None = None
    end_time: UtcDatetime | None = None
    requested_gpus: float = Field(default=0.0, ge=0)  # job-wide, whole-GPU equivalents
    gpus: list[GpuRequest] = Field(default_factory=list)  # held on this node
    device_ids: list[str] = Field(default_factory=list)  # "GPU-<uuid>", "MIG-<uuid>", "<id>::<replica>"
    gpu_indices: list[int] = Field(default_factory=list)  # Slurm gres_detail IDX
    # Kubernetes pod metadata.uid: a pod re-created under the same name (StatefulSet) is another
    # placement, whatever attempt number a restarted collector gives it (part of event ids too)
    uid: str | None = None
    # other ids GPU-metrics labels may carry for this job: the unique SLURM_JOB_ID of an array
    # task ``<array>_<task>`` (dcgm-exporter's ``hpc_job``)
    aliases: list[str] = Field(default_factory=list)
    # Dynamic Resource Allocation: the ResourceClaims (``<namespace>/<name>``) this placement holds its
    # devices through. A device in ``device_ids`` held through a claim may be held by several
    # placements at once (a claim reserved for several pods): it is split equally among the
    # placements holding it at each instant (docs/ATTRIBUTION.md "DRA")
    claims: list[str] = Field(default_factory=list)
    owner: Owner = Field(default_factory=Owner)
    outcome: Outcome | None = None  # set when state == "ended"
    failure_reason: FailureReason | None = None
    exit_code: int | None = None
    signal: int | None = None
    scheduler_state: str | None = None  # the scheduler's own words: "OOMKilled", "NODE_FAIL", …

    @property
    def time_sliced(self) -> bool:
        """Device ids name time-sliced replicas (``GPU-<uuid>::<k>``): with the GPU Operator's default
        ``renameByDefault: false`` the pod asks for plain ``nvidia.com/gpu`` and holds replicas."""
        return bool(self.device_ids) and all(is_replica_id(d) for d in self.device_ids)

    @property
    def replicas(self) -> int:
        return self.replicas_on(None)

    def replicas_on(self, node_replicas: int | None) -> int:
        """Replicas per GPU of what this placement holds: a shared request's own (the
        ``gpuledger.io/replicas`` annotation or ``--replicas``), else the node's at that time
        (``NodeStateData.gpu_replicas``), else :data:`DEFAULT_REPLICAS`."""
        for req in self.gpus:
            if req.kind == "shared" and req.replicas:
                return req.replicas
        return node_replicas or DEFAULT_REPLICAS

    def holds_replicas(self, node_replicas: int | None) -> bool:
        """Plain ``gpu`` requests are replicas: device ids name replicas, or the node shares each GPU
        among ``node_replicas`` > 1 (time-slicing or MPS) and the devices are not held through DRA claims."""
        return self.time_sliced or (node_replicas or 1) > 1 and not self.claims

    @property
    def gpu_equivalents(self) -> float:
        return self.gpu_equivalents_on(None)

    def gpu_equivalents_on(self, node_replicas: int | None) -> float:
        """Whole-GPU equivalents held on a node sharing each GPU among ``node_replicas`` (None: not
        stated); a plain ``gpu`` request served by replicas is ``count / replicas``."""
        n = self.replicas_on(node_replicas)
        replica_kinds = ("gpu", "shared") if self.holds_replicas(node_replicas) else ("shared",)
        return sum(r.count / n if r.kind in replica_kinds else r.gpu_equivalents for r in self.gpus)

    @model_validator(mode="after")
    def _consistent(self) -> AllocationData:
        if self.state == "ended":
            if self.outcome is None:
                raise ValueError("an ended placement needs an outcome")
            if self.end_time is None:
                raise ValueError("an ended placement needs end_time")
        if self.state in ("running", "ended") and self.start_time is None:
            raise ValueError(f"a {self.state} placement needs start_time")
        if self.start_time and self.end_time and self.end_time < self.start_time:
            raise ValueError("end_time before start_time")
        if self.outcome == "failure" and self.failure_reason is None:
            raise ValueError("a failed attempt needs a failure_reason")
        for req in self.gpus:
            if req.kind == "mig":  # an unknown profile would stop attribution of the whole node
                mig_fraction(req.profile, req.gpu_type)
        return self


class NodeStateData(_Model):
    """A node drained, down or back up (Slurm node state, Kubernetes node conditions/cordon)."""

    node: str
    state: Literal["up", "drained", "down"]  # NotReady and cordoned Kubernetes nodes are "down"/"drained"
    reason: str | None = None
    gpus: int | None = Field(default=None, ge=0)  # physical GPUs: allocatable nvidia.com/gpu or gres count
    gpu_model: str | None = None  # short key or modelName, when the source states it
    # GPU sharing the device plugin configures on the node, as GPU Feature Discovery labels it
    # (``nvidia.com/gpu.replicas``, ``nvidia.com/gpu.sharing-strategy``): each physical GPU is
    # advertised as ``gpu_replicas`` replicas, shared by time-slicing or MPS; effective from ``time``
    gpu_replicas: int | None = Field(default=None, ge=1)
    sharing: Literal["none", "time-slicing", "mps"] | None = None


# --------------------------------------------------------------------------------------------
# storage.io — per-node throughput counters and checkpoint events
# --------------------------------------------------------------------------------------------
class StorageSample(_Model):
    fs_type: Literal["disk", "nfs", "lustre", "gpfs"]
    device: str  # block device, NFS mount, Lustre target / filesystem, GPFS filesystem
    read_bytes: NonNegative  # cumulative counter
    write_bytes: NonNegative  # cumulative counter
    job_id: str | None = None  # lustre_job_* per-job stats


class StorageData(_Model):
    node: str
    samples: list[StorageSample]


class CheckpointData(_Model):
    """A checkpoint written or restored by training code (documented JSON-lines format)."""

    job_id: str
    attempt: int | None = Field(default=None, ge=1)
    kind: Literal["write", "restore"] = "write"
    path: str
    bytes: int = Field(ge=0)
    started: UtcDatetime
    finished: UtcDatetime
    node: str | None = None

    @model_validator(mode="after")
    def _ordered(self) -> CheckpointData:
        if self.finished < self.started:
            raise ValueError("checkpoint finished before it started")
        return self


# --------------------------------------------------------------------------------------------
# workload.output — what a workload produced (tokens, samples, requests), for the unit cost
# --------------------------------------------------------------------------------------------
OutputUnit = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")]


class OutputData(_Model):
    """Units of work a job produced over ``[start, end)``: tokens generated or processed, samples or
    images trained on, requests served (docs/ATTRIBUTION.md "Outputs"). The owner is the job's, as
    its allocations say: ``job_id`` as the scheduler names it (Slurm ``1234``/``1234_7``,
    Kubernetes ``<namespace>/<pod>``)."""

    scheduler: Literal["kubernetes", "slurm"]
    job_id: str = Field(min_length=1, max_length=512)
    unit: OutputUnit
    quantity: NonNegative
    start: UtcDatetime
    end: UtcDatetime
    model_name: str | None = Field(default=None, max_length=512)  # what the server calls its model

    @model_validator(mode="after")
    def _ordered(self) -> OutputData:
        if self.end < self.start:
            raise ValueError("output interval ends before it starts")
        return self


# --------------------------------------------------------------------------------------------
# benchmarks.runs — one nccl-tests run
# --------------------------------------------------------------------------------------------
class NcclSizeResult(_Model):
    size_bytes: int = Field(ge=0)
    count: int = Field(ge=0)
    dtype: str
    redop: str | None = None
    root: int | None = None
    out_of_place_time_us: float | None = None
    out_of_place_algbw_gbps: float | None = None
    out_of_place_busbw_gbps: float | None = None
    out_of_place_wrong: int | None = None  # None when the log printed N/A
    in_place_time_us: float | None = None
    in_place_algbw_gbps: float | None = None
    in_place_busbw_gbps: float | None = None
    in_place_wrong: int | None = None


class NcclDevice(_Model):
    rank: int
    host: str
    pid: int | None = None
    device: int
    bus_id: str | None = None
    name: str | None = None


class BenchmarkRunData(_Model):
    run_id: str
    collective: str  # all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall, sendrecv…
    hosts: list[str]
    ranks: int = Field(ge=0)
    devices: list[NcclDevice] = Field(default_factory=list)
    nccl_version: str | None = None
    tests_version: str | None = None
    results: list[NcclSizeResult] = Field(default_factory=list)
    avg_busbw_gbps: float | None = None
    out_of_bounds: int = 0
    wrong_total: int = 0
    ok: bool
    started: UtcDatetime | None = None


# --------------------------------------------------------------------------------------------
# org.mappings — effective-dated reference data
# --------------------------------------------------------------------------------------------
class OrgMappingData(_Model):
    effective_from: UtcDatetime
    teams: dict[str, str] = Field(default_factory=dict)  # team -> business unit
    accounts: dict[str, str] = Field(default_factory=dict)  # Slurm account -> team
    namespaces: dict[str, str] = Field(default_factory=dict)  # Kubernetes namespace -> team


class SharedCosts(_Model):
    network: NonNegative = 0.0
    storage: NonNegative = 0.0
    support: NonNegative = 0.0
    operations: NonNegative = 0.0


class PricingData(_Model):
    effective_from: UtcDatetime
    currency: str = Field(min_length=3, max_length=3)
    gpu_hourly: dict[str, NonNegative]  # GPU model ("H100") -> rate per GPU-hour
    monthly: SharedCosts = Field(default_factory=SharedCosts)
    idle_policy: Literal["spread", "platform", "by_allocation"] = "spread"
    # what a kWh costs and emits: shown beside the GPU-hours (energy cost is part of the GPU-hour
    # rate, not billed again); absent when not known
    energy_per_kwh: NonNegative | None = None
    carbon_g_per_kwh: NonNegative | None = None


# --------------------------------------------------------------------------------------------
# gpuledger.control — end-of-input markers for `ingest --wait`
# --------------------------------------------------------------------------------------------
class MarkerData(_Model):
    marker: str
    offsets: dict[str, dict[int, int]]  # topic -> partition -> end offset at publish time


# --------------------------------------------------------------------------------------------
# envelopes
# --------------------------------------------------------------------------------------------
class Envelope(_Model):
    id: str = Field(min_length=8, max_length=128)
    source: Source
    type: str
    schema_version: int = SCHEMA_VERSION
    time: UtcDatetime
    cluster: str = Field(min_length=1, max_length=128)
    data: Any

    @property
    def last_time(self) -> datetime:
        """The latest time the event stands for: its ``time``, unless it carries several (a
        ``gpu.sample`` of several scrapes)."""
        return self.time

    def to_bytes(self) -> bytes:
        return orjson.dumps(self.model_dump(mode="json"))


class GpuMetricsEvent(Envelope):
    type: Literal["gpu.sample"] = "gpu.sample"
    data: GpuMetricsData


class AllocationEvent(Envelope):
    type: Literal["allocation.pending", "allocation.running", "allocation.ended"]
    data: AllocationData


class NodeStateEvent(Envelope):
    type: Literal["node.state"] = "node.state"
    data: NodeStateData


class StorageEvent(Envelope):
    type: Literal["storage.counters"] = "storage.counters"
    data: StorageData


class CheckpointEvent(Envelope):
    type: Literal["checkpoint"] = "checkpoint"
    data: CheckpointData


class OutputEvent(Envelope):
    type: Literal["workload.output"] = "workload.output"
    data: OutputData


class BenchmarkRunEvent(Envelope):
    type: Literal["benchmark.run"] = "benchmark.run"
    data: BenchmarkRunData


class OrgMappingEvent(Envelope):
    type: Literal["org.mapping"] = "org.mapping"
    data: OrgMappingData


class PricingEvent(Envelope):
    type: Literal["pricing.rates"] = "pricing.rates"
    data: PricingData


class MarkerEvent(Envelope):
    type: Literal["control.marker"] = "control.marker"
    data: MarkerData


AnyEvent = Annotated[
    GpuMetricsEvent
    | AllocationEvent
    | NodeStateEvent
    | StorageEvent
    | CheckpointEvent
    | OutputEvent
    | BenchmarkRunEvent
    | OrgMappingEvent
    | PricingEvent
    | MarkerEvent,
    Field(discriminator="type"),
]
ANY_EVENT: TypeAdapter[Any] = TypeAdapter(AnyEvent)

TOPIC_OF_TYPE: dict[str, topics.Topic] = {
    "gpu.sample": topics.GPU_METRICS,
    "allocation.pending": topics.SCHEDULER_ALLOCATIONS,
    "allocation.running": topics.SCHEDULER_ALLOCATIONS,
    "allocation.ended": topics.SCHEDULER_ALLOCATIONS,
    "node.state": topics.SCHEDULER_ALLOCATIONS,
    "storage.counters": topics.STORAGE_IO,
    "checkpoint": topics.STORAGE_IO,
    "workload.output": topics.STORAGE_IO,  # job telemetry, keyed by job like checkpoints
    "benchmark.run": topics.BENCHMARKS_RUNS,
    "org.mapping": topics.ORG_MAPPINGS,
    "pricing.rates": topics.ORG_MAPPINGS,
    "control.marker": topics.CONTROL,
}


def message_key(event: Envelope) -> bytes:
    """The Kafka key: per-node messages by ``cluster/node`` (co-partitioning), others by subject."""
    data = event.data
    node = getattr(data, "node", None)
    if node:
        return topics.node_key(event.cluster, node)
    if isinstance(data, AllocationData | CheckpointData | OutputData):
        return topics.job_key(event.cluster, data.job_id)
    if isinstance(data, BenchmarkRunData):
        return f"{event.cluster}/{data.run_id}".encode()
    return f"{event.type}/{event.id}".encode()


class InvalidEvent(ValueError):
    """A record that cannot become a valid event; the reason is one line."""


def one_line(exc: BaseException) -> str:
    """An error in one line: a validation error's first three field errors, or the message."""
    if not isinstance(exc, ValidationError):
        return " ".join(str(exc).split())[:500]
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(p) for p in err.get("loc", ()))
        parts.append(f"{loc}: {err.get('msg')}" if loc else str(err.get("msg")))
    more = f" (+{exc.error_count() - 3} more)" if exc.error_count() > 3 else ""
    return "; ".join(parts) + more


# --------------------------------------------------------------------------------------------
# dead letters
# --------------------------------------------------------------------------------------------
class DeadLetter(_Model):
    """What could not become an event, kept whole: where it came from, why, and the raw bytes."""

    id: str
    topic: str  # the data topic it was meant for
    source: str  # collector or stage that rejected it ("slurm", "streams.attribution", …)
    reason: str  # one line
    raw: str  # the raw record (UTF-8 text; undecodable bytes as backslash escapes)
    time: UtcDatetime  # when it was rejected
    origin: str | None = None  # file path / URL / "topic:partition:offset"

    @classmethod
    def build(
        cls,
        *,
        topic: str,
        source: str,
        reason: str,
        raw: bytes | str,
        origin: str | None = None,
        time: datetime | None = None,
    ) -> DeadLetter:
        text = raw if isinstance(raw, str) else raw.decode("utf-8", errors="backslashreplace")
        reason_line = " ".join(reason.split())[:1000]
        return cls(
            id=event_id("dlq", topic, source, origin, text),
            topic=topic,
            source=source,
            reason=reason_line,
            raw=text,
            time=time or datetime.now(UTC),
            origin=origin,
        )

    def to_bytes(self) -> bytes:
        return orjson.dumps(self.model_dump(mode="json"))
