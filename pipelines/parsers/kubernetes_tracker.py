"""``PodTracker``: pod objects / watch events in, allocation events out, as state changes (pure).

Used by the file parser (:mod:`pipelines.parsers.kubernetes`) and by the live collector alike:
feed it pods in the order they were observed; each call returns a ``ParseResult`` with the
events that observation produced (an event id is emitted once per pod; the same input always
gives the same ids). No I/O, no clock: times come from the objects or from the caller.

Attempts (docs/ATTRIBUTION.md):

* Container restarts split a pod into attempts that tile its interval: attempt 1 starts at
  ``status.startTime``; attempt *k* ends at that run's ``lastState.terminated.finishedAt`` (else the
  new run's ``startedAt``, else the observation time); attempt *k+1* starts there. The local
  attempt of a pod is ``1 + Σ restartCount`` over its GPU containers.
* When more than one restart happened between two observations (always so for a first look at a
  pod with ``restartCount`` ≥ 2, as in a single pod-list snapshot), the runs before the last
  terminated one are merged into one attempt with reason ``unknown``, numbered ``restartCount −
  1`` (or, if an attempt of this pod is already open, that attempt's number, so it gets closed).
  That merged attempt ends where the last terminated run started. Ids come from the natural key,
  so a snapshot's attempt has the id the watch stream gives the same attempt number; what a
  snapshot cannot know (the merged runs' reasons, the back-off before the last terminated run)
  differs, and downstream keeps whichever it saw first.
* Job retries: pods of one Job (``ownerReferences`` kind Job, else label
  ``batch.kubernetes.io/job-name``) share ``logical_job = <namespace>/<job>``. Their attempt numbers
  continue one another: a pod's attempts are ``base + local`` where ``base`` is the sum of the
  attempts used by the Job's pods seen before it (in creation order, which a watch stream
  follows and the file parser sorts snapshots into). Without restarts this is exactly
  ``1 + the number of earlier pods``. Pods of a Job that run in parallel are numbered the same
  way, in creation order. A pod re-created under the same name (StatefulSet) continues the
  attempts of its predecessor the same way; its ``uid`` (``metadata.uid``) is part of its events'
  data and ids, so it never shares an id or a placement with its predecessor. The attempts used
  per group survive a collector restart through :meth:`PodTracker.export_state`.

Events per pod: ``allocation.pending`` (job level, attempt ``base + 1``, at ``creationTimestamp``);
per attempt, ``allocation.running`` on ``spec.nodeName`` at the attempt's start (state as while
running) and ``allocation.ended`` at its end with the failure class
(:mod:`pipelines.parsers.kubernetes_outcome`). ``BOOKMARK`` events produce nothing; ``ERROR``
events are dead letters. A watch line may carry a non-standard ``"time"`` key (RFC 3339: when
the event was observed); it dates a DELETED pod that has no ``deletionTimestamp``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pipelines import topics
from pipelines.events import GpuRequest
from pipelines.parsers import kubernetes_outcome as out
from pipelines.parsers.base import ParseResult
from pipelines.parsers.kubernetes_dra import DraInventory
from pipelines.parsers.kubernetes_pod import DEVICES_ANNOTATION, PodView, read_pod
from pipelines.parsers.sched_events import RECORD_ERRORS, add_record_events, allocation_envelope, raw_text
from pipelines.times import optional_time

TOPIC = topics.SCHEDULER_ALLOCATIONS
SOURCE = "kubernetes"
WATCH_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"})
DeviceMap = Mapping[tuple[str, str, str], list[str]]


@dataclass
class _PodState:
    uid: str | None
    group: str
    member: str
    base: int
    logical: str
    job_name: str
    restarts: int = 0
    attempt_start: datetime | None = None
    open_attempt: int | None = None  # local number of the attempt whose running event went out
    ended: bool = False
    emitted: set[str] = field(default_factory=set)


class PodTracker:
    """Turns a sequence of pod observations into allocation events (see the module docstring)."""

    def __init__(
        self, *, cluster: str, replicas: int | None = None, workload_kind: str | None = None, max_groups: int = 200_000
    ) -> None:
        if workload_kind is not None and workload_kind not in out.WORKLOAD_KINDS:
            kinds = ", ".join(sorted(out.WORKLOAD_KINDS))
            raise ValueError(f"workload_kind must be one of {kinds}, not {workload_kind!r}")
        if replicas is not None and (type(replicas) is not int or replicas < 1):
            raise ValueError(f"replicas must be a positive integer, got {replicas!r}")
        self.cluster = cluster
        self.replicas = replicas
        self.workload_kind = workload_kind
        self._max_groups = max_groups
        self._pods: dict[str, _PodState] = {}
        self._groups: OrderedDict[str, dict[str, int]] = OrderedDict()  # group -> member -> attempts used
        self._devices: dict[tuple[str, str, str], list[str]] = {}
        self.dra = DraInventory()  # ResourceClaims and ResourceSlices: GPUs held through claims
        self.without_gpu: set[str] = set()  # "<namespace>/<name>" of pods seen holding no GPU
        self._restored: dict[str, tuple[str | None, set[str]]] = {}  # key -> (uid, ids emitted before a restart)

    def export_state(self) -> dict[str, Any]:
        """What a restart needs: the attempts used per group and member (numbering), and the ids
        already emitted for each pod still followed (a restarted collector's first list then
        emits only what is new about them)."""
        return {
            "groups": {group: dict(members) for group, members in self._groups.items()},
            "emitted": {
                key: {"uid": state.uid, "ids": sorted(state.emitted)}
                for key, state in self._pods.items()
                if state.emitted
            },
        }

    def import_state(self, state: Mapping[str, Any]) -> None:
        groups = state.get("groups")
        for group, members in groups.items() if isinstance(groups, dict) else ():
            if isinstance(members, dict):
                known = self._groups.setdefault(str(group), {})
                for member, used in members.items():
                    if isinstance(used, int):
                        known[str(member)] = max(known.get(str(member), 1), used)
        emitted = state.get("emitted")
        for key, saved in emitted.items() if isinstance(emitted, dict) else ():
            if isinstance(saved, dict) and isinstance(saved.get("ids"), list):
                self._restored[str(key)] = (saved.get("uid"), {str(i) for i in saved["ids"]})

    def set_devices(self, devices: DeviceMap) -> None:
        """Device ids per (namespace, pod, container), e.g. from ``parse_pod_resources``."""
        self._devices = {key: list(ids) for key, ids in devices.items()}

    def lacks_devices(self, pod: Any, *, node: str | None = None) -> bool:
        """Whether ``pod`` is placed (on ``node``, when given) and holds GPUs in a container the
        device map does not name: a device source asked before the pod was admitted."""
        try:
            view = self.read(pod) if isinstance(pod, dict) else None
        except RECORD_ERRORS:
            return False  # it will be a dead letter, with or without devices
        if view is None or view.start is None or view.node is None or node not in (None, view.node):
            return False
        if len(view.gpus) == len(view.held.gpus):
            return False  # only claims: the kubelet's device plugin list never names their devices
        return any((view.namespace, view.name, c.name) not in self._devices for c in view.containers)

    def read(self, pod: dict[str, Any]) -> PodView | None:
        """The pod as :func:`read_pod` reads it with this tracker's settings and claims."""
        return read_pod(pod, replicas=self.replicas, dra=self.dra)

    def no_gpu_note(self) -> str | None:
        """What to say about the pods seen holding no GPU, if any."""
        if not self.without_gpu:
            return None
        return (
            f"{len(self.without_gpu)} pod(s) hold no GPU (no nvidia.com/gpu or MIG resource, no GPU claim): "
            "nothing to attribute for them"
        )

    def feed(
        self, event: Any, *, observed_at: datetime | None = None, raw: str | None = None, origin: str | None = None
    ) -> ParseResult:
        """One watch event ``{"type": .., "object": ..}``."""
        raw = raw if raw is not None else raw_text(event)
        result = ParseResult()
        kind = event.get("type") if isinstance(event, dict) else None
        if not isinstance(kind, str) or kind not in WATCH_TYPES or not isinstance(event, dict):
            result.reject(topic=TOPIC.name, source=SOURCE, reason="not a watch event", raw=raw, origin=origin)
            return result
        if kind == "BOOKMARK":
            return result
        obj = event.get("object")
        if kind == "ERROR":
            message = obj.get("message") if isinstance(obj, dict) else None
            code = obj.get("code") if isinstance(obj, dict) else None
            result.reject(
                topic=TOPIC.name, source=SOURCE, reason=f"watch ERROR event {code}: {message}", raw=raw, origin=origin
            )
            return result
        try:
            seen = optional_time(event.get("time")) or observed_at
        except ValueError as exc:
            result.reject(topic=TOPIC.name, source=SOURCE, reason=str(exc), raw=raw, origin=origin)
            return result
        return self.observe(obj, deleted=kind == "DELETED", observed_at=seen, raw=raw, origin=origin)

    def observe(
        self,
        pod: Any,
        *,
        deleted: bool = False,
        observed_at: datetime | None = None,
        raw: str | None = None,
        origin: str | None = None,
    ) -> ParseResult:
        """One pod object as observed (``deleted``: it came in a DELETED event)."""
        result = ParseResult()
        raw = raw if raw is not None else raw_text(pod)
        try:
            if not isinstance(pod, dict):
                raise ValueError("pod is not an object")
            view = self.read(pod)
            if view is None:  # no GPU: nothing to attribute
                meta = pod.get("metadata")
                if isinstance(meta, dict):
                    self.without_gpu.add(f"{meta.get('namespace') or 'default'}/{meta.get('name')}")
                return result
            objs = self._step(view, deleted, observed_at)
            for note in view.held.notes:
                result.note(note)
        except RECORD_ERRORS as exc:
            result.reject(topic=TOPIC.name, source=SOURCE, reason=str(exc), raw=raw, origin=origin)
            return result
        add_record_events(result, objs, topic=TOPIC.name, source=SOURCE, raw=raw, origin=origin)
        return result

    # ---------------------------------------------------------------------------------------
    def _step(self, view: PodView, deleted: bool, observed_at: datetime | None) -> list[dict[str, Any]]:
        state = self._state_for(view)
        if state.ended:
            self._commit(view, state, [], ended=True, deleted=deleted)
            return []
        base = self._base(view, state)
        objs: list[dict[str, Any]] = []
        if view.created is not None:
            objs.append(
                self._envelope(
                    "allocation.pending",
                    view.created,
                    {**base, "attempt": state.base + 1, "state": "pending", "scheduler_state": "Pending"},
                )
            )
        ended = out.pod_ended(view, deleted)
        if view.start is None or view.node is None:
            self._commit(view, state, objs, ended=ended, deleted=deleted)
            return objs  # never placed (yet)
        placed = {**base, "node": view.node, "gpus": view.gpus, "device_ids": self._device_ids(view)}
        restarts = max(view.restarts, state.restarts)
        start = state.attempt_start or view.start
        open_attempt = state.open_attempt
        if restarts > state.restarts:
            for local, begin, end, outcome in _restart_attempts(
                view, state.restarts, restarts, start, open_attempt, observed_at
            ):
                objs += self._attempt(placed, state.base + local, begin, end, outcome)
                start = end
        local = restarts + 1
        if ended:
            end = max(out.pod_end_time(view, deleted, observed_at, observed_at), start)
            outcome = out.pod_outcome(view, deleted, observed_at)
            objs += self._attempt(placed, state.base + local, start, end, outcome)
        else:
            objs += self._attempt(placed, state.base + local, start, None, None)
        state.restarts, state.attempt_start, state.open_attempt = restarts, start, local
        self._commit(view, state, objs, ended=ended, deleted=deleted)
        return objs

    def _attempt(
        self, placed: dict[str, Any], attempt: int, start: datetime, end: datetime | None, outcome: out.Outcome | None
    ) -> list[dict[str, Any]]:
        running = {**placed, "attempt": attempt, "state": "running", "start_time": start, "scheduler_state": "Running"}
        objs = [self._envelope("allocation.running", start, running)]
        if end is not None and outcome is not None:
            ended = {**running, "state": "ended", "end_time": end, **outcome.fields()}
            objs.append(self._envelope("allocation.ended", end, ended))
        return objs

    def _commit(
        self, view: PodView, state: _PodState, objs: list[dict[str, Any]], *, ended: bool, deleted: bool
    ) -> None:
        """Drop already-emitted ids from ``objs`` (in place) and record the pod's new state."""
        objs[:] = [obj for obj in objs if obj["id"] not in state.emitted]
        state.emitted.update(obj["id"] for obj in objs)
        members = self._groups.setdefault(state.group, {})
        members[state.member] = max(members.get(state.member, 1), state.restarts + 1)
        state.ended = state.ended or ended
        if deleted:  # the group stays: a pod re-created under this name continues its attempts
            self._pods.pop(view.key, None)
            self.dra.forget(f"{view.key}/{view.uid}")

    def _state_for(self, view: PodView) -> _PodState:
        state = self._pods.get(view.key)
        if state is not None and (view.uid is None or state.uid in (None, view.uid)):
            return state
        group, logical, job_name = out.job_identity(view)
        members = self._groups.setdefault(group, {})
        self._groups.move_to_end(group)
        while len(self._groups) > self._max_groups:
            self._groups.popitem(last=False)
        member = view.uid or view.key
        base = sum(used for name, used in members.items() if name != member)
        members.setdefault(member, 1)
        state = _PodState(uid=view.uid, group=group, member=member, base=base, logical=logical, job_name=job_name)
        restored_uid, emitted = self._restored.pop(view.key, (None, set()))
        if restored_uid == view.uid:  # the same pod as before the restart, not one re-created under its name
            state.emitted = emitted
        self._pods[view.key] = state
        return state

    def _base(self, view: PodView, state: _PodState) -> dict[str, Any]:
        requested = sum(_equivalents(g) for g in view.gpus)
        base: dict[str, Any] = {
            "scheduler": "kubernetes",
            "job_id": view.key,
            "logical_job": state.logical,
            "job_name": state.job_name,
            "submit_time": view.created,
            "requested_gpus": requested,
            "owner": out.owner(view, self.workload_kind),
        }
        if view.uid:
            base["uid"] = view.uid
        if view.held.claims:
            base["claims"] = list(view.held.claims)
        return base

    def _device_ids(self, view: PodView) -> list[str]:
        known = [
            device for c in view.containers for device in self._devices.get((view.namespace, view.name, c.name), [])
        ]
        if not known:
            annotation = view.annotations.get(DEVICES_ANNOTATION, "")
            known = [part.strip() for part in annotation.split(",") if part.strip()]
        return known + [device for device in view.held.device_ids if device not in known]

    def _envelope(self, event_type: str, time: datetime, data: dict[str, Any]) -> dict[str, Any]:
        return allocation_envelope(source=SOURCE, event_type=event_type, cluster=self.cluster, time=time, data=data)


def _restart_attempts(
    view: PodView, seen: int, now: int, start: datetime, open_attempt: int | None, observed_at: datetime | None
) -> list[tuple[int, datetime, datetime, out.Outcome]]:
    """The attempts that ended between two observations: ``(local number, start, end, outcome)``."""
    runs = [c.last_terminated for c in view.containers if c.restart_count > 0 and c.last_terminated]
    last = max(runs, key=lambda r: (r.finished is not None, r.finished or start), default=None)
    restarted = [c.running_since for c in view.containers if c.running_since is not None]
    boundary = (last.finished if last and last.finished else None) or (max(restarted) if restarted else None)
    boundary = boundary or observed_at
    if boundary is None:
        raise ValueError(f"pod {view.key}: container restarted but no time tells when")
    boundary = max(boundary, start)
    attempts = []
    if now - seen >= 2:
        merged_end = max(min(last.started, boundary) if last and last.started else boundary, start)
        merged_number = open_attempt if open_attempt is not None else now - 1
        attempts.append((merged_number, start, merged_end, out.restart_outcome(None)))
        start = merged_end
    attempts.append((now, start, boundary, out.restart_outcome(last)))
    return attempts


def _equivalents(gpu: dict[str, Any]) -> float:
    return GpuRequest.model_validate(gpu).gpu_equivalents
