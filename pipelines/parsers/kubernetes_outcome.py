"""How a pod's attempt ended, when it ended, and who owns the pod (pure; docs/ATTRIBUTION.md).

A pod's last attempt ends when the pod is deleted or reaches phase Succeeded/Failed, or when all
its GPU containers have terminated for good (restartPolicy Never, OnFailure with exit 0, or the pod
is being deleted) even if a sidecar without GPUs keeps the pod running. Its class, first match wins:

1. ``node_failure`` — status reason ``NodeLost`` or ``NodeShutdown``, ``Terminated`` with a message
   about the node (lost, shut down, not ready, unreachable, failure), or a ``DisruptionTarget``
   condition with reason ``DeletionByTaintManager`` / ``DeletionByPodGC`` (node gone or not ready).
2. ``preempted`` — status reason ``Evicted`` / ``Preempting``, or a true ``DisruptionTarget``
   condition with reason ``PreemptionByScheduler`` (``PreemptionByKubeScheduler`` before 1.27),
   ``TerminationByKubelet`` or ``EvictionByEvictionAPI``.
3. ``timeout`` — status reason ``DeadlineExceeded`` (``activeDeadlineSeconds``).
4. ``cancelled`` — the pod was deleted and its GPU containers had not finished before the deletion
   was requested (``deletionTimestamp − deletionGracePeriodSeconds``, or the DELETED event).
5. from the GPU containers' terminated states: any ``OOMKilled`` -> ``oom``; every exit 0
   (``Completed``) -> ``success``; ``ContainerStatusUnknown`` / no exit code -> ``unknown``; any
   other non-zero exit (``Error``) -> ``app_error``. A restarted run (``lastState.terminated``) is
   classified the same way, except that exit 0 is ``unknown``: only a clean last run is a success.
6. phase ``Succeeded`` with no container state -> ``success``; otherwise ``unknown``.

End time: the last GPU container's ``finishedAt`` when all of them finished; else the deletion
(the earlier of ``deletionTimestamp`` and the DELETED event's time); else, for a pod that failed
without container states, the ``DisruptionTarget`` condition's time, else the latest time in the
status, else the observation time.

Owner: namespace; labels (without per-pod controller bookkeeping such as ``pod-template-hash``);
user from label ``user`` / ``gpuledger.io/user`` or annotation ``gpuledger.io/user``; queue from
label ``kueue.x-k8s.io/queue-name``, else ``priorityClassName``; workload kind from label
``gpuledger.io/kind`` or ``workload-kind``, else the ``workload_kind`` hint, else ``notebook`` for
pods labelled ``notebook-name`` (Kubeflow notebooks), ``batch`` for pods owned by a Job, else
``unknown`` (a Deployment or StatefulSet could be serving or training: not guessed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pipelines.parsers.kubernetes_pod import PodView, Run
from pipelines.times import optional_time

WORKLOAD_KINDS = frozenset({"training", "inference", "notebook", "batch", "benchmark", "unknown"})
KIND_LABELS = ("gpuledger.io/kind", "workload-kind")
USER_KEYS = ("gpuledger.io/user", "user")
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
NOISE_LABELS = frozenset(
    {
        "pod-template-hash",
        "controller-revision-hash",
        "pod-template-generation",
        "controller-uid",
        "batch.kubernetes.io/controller-uid",
        "statefulset.kubernetes.io/pod-name",
        "apps.kubernetes.io/pod-index",
        "batch.kubernetes.io/job-completion-index",
    }
)
NODE_REASONS = frozenset({"NodeLost", "NodeShutdown"})
NODE_DISRUPTIONS = frozenset({"DeletionByTaintManager", "DeletionByPodGC"})
PREEMPT_REASONS = frozenset({"Evicted", "Preempting"})
PREEMPT_DISRUPTIONS = frozenset(
    {"PreemptionByScheduler", "PreemptionByKubeScheduler", "TerminationByKubelet", "EvictionByEvictionAPI"}
)
_NEVER = datetime.min.replace(tzinfo=UTC)
_NODE_MESSAGE = re.compile(r"node.*(lost|shut ?down|not ?ready|unreachable|fail)", re.IGNORECASE)


@dataclass(frozen=True)
class Outcome:
    outcome: str  # "success" | "failure"
    failure_reason: str | None
    scheduler_state: str
    exit_code: int | None = None
    signal: int | None = None

    def fields(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "failure_reason": self.failure_reason,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "scheduler_state": self.scheduler_state,
        }


def pod_ended(view: PodView, deleted: bool) -> bool:
    """Has the pod released its GPUs: is it done, or are its GPU containers done for good (a
    sidecar without GPUs may keep the pod running)?"""
    if deleted or view.phase in ("Succeeded", "Failed"):
        return True
    if not view.containers or not all(c.terminated is not None for c in view.containers):
        return False
    if view.deletion is not None or view.restart_policy == "Never":
        return True
    if view.restart_policy == "OnFailure":
        return all(c.terminated is not None and c.terminated.exit_code == 0 for c in view.containers)
    return False


def pod_outcome(view: PodView, deleted: bool, deleted_at: datetime | None) -> Outcome:
    """The failure class of the pod's last attempt (the order in the module docstring)."""
    disruption = _disruption(view)
    decisive = _decisive([c.terminated for c in view.containers if c.terminated is not None])
    codes = (decisive.exit_code, decisive.signal) if decisive else (None, None)
    message_says_node = view.reason == "Terminated" and _NODE_MESSAGE.search(view.message or "")
    if view.reason in NODE_REASONS or message_says_node or (disruption and disruption[0] in NODE_DISRUPTIONS):
        return Outcome("failure", "node_failure", view.reason or (disruption or ("NodeLost",))[0], *codes)
    if view.reason in PREEMPT_REASONS or (disruption and disruption[0] in PREEMPT_DISRUPTIONS):
        said = view.reason if view.reason in PREEMPT_REASONS else None
        return Outcome("failure", "preempted", said or (disruption or ("DisruptionTarget",))[0], *codes)
    if view.reason == "DeadlineExceeded":
        return Outcome("failure", "timeout", "DeadlineExceeded", *codes)
    requested = view.deletion_requested or (deleted_at if deleted else None)
    finished = decisive.finished if decisive is not None else None
    killed_by_deletion = finished is None or (requested is not None and finished >= requested)
    if (deleted or requested is not None) and killed_by_deletion:
        return Outcome("failure", "cancelled", "Deleted", *codes)
    if decisive is not None:
        return run_outcome(decisive)
    if view.phase == "Succeeded":
        return Outcome("success", None, "Succeeded")
    return Outcome("failure", "unknown", view.reason or view.phase or "Unknown")


def run_outcome(run: Run | None) -> Outcome:
    """The class of one terminated container run."""
    if run is None:
        return Outcome("failure", "unknown", "Unknown")
    state, codes = run.reason or "Unknown", (run.exit_code, run.signal)
    if run.reason == "OOMKilled":
        return Outcome("failure", "oom", state, *codes)
    if run.exit_code == 0:
        return Outcome("success", None, run.reason or "Completed", *codes)
    if run.exit_code is None or run.reason in ("ContainerStatusUnknown", "Unknown"):
        return Outcome("failure", "unknown", state, *codes)
    return Outcome("failure", "app_error", run.reason or "Error", *codes)


def restart_outcome(run: Run | None) -> Outcome:
    """The class of a run that was restarted: never a success (only a clean *last* run is), so a
    run that exited 0 and was started again is ``unknown`` waste."""
    result = run_outcome(run)
    if result.outcome == "success":
        return Outcome("failure", "unknown", result.scheduler_state, result.exit_code, result.signal)
    return result


def pod_end_time(view: PodView, deleted: bool, deleted_at: datetime | None, observed_at: datetime | None) -> datetime:
    """When the pod's last attempt ended (the order in the module docstring)."""
    finished = [c.terminated.finished if c.terminated else None for c in view.containers]
    if finished and all(t is not None for t in finished):
        return max(t for t in finished if t is not None)
    deletions = [t for t in (view.deletion, deleted_at if deleted else None) if t is not None]
    if deletions:
        return min(deletions)
    disruption = _disruption(view)
    for candidate in (disruption[1] if disruption else None, view.latest_time, observed_at):
        if candidate is not None:
            return candidate
    raise ValueError("pod ended without any end time (no finishedAt, deletion or condition time)")


def _decisive(runs: list[Run]) -> Run | None:
    """The run that decides the class: an OOM kill, else a non-zero exit, else the last to finish."""
    if not runs:
        return None
    by_finish = sorted(runs, key=lambda r: r.finished or _NEVER)
    for run in reversed(by_finish):
        if run.reason == "OOMKilled":
            return run
    for run in reversed(by_finish):
        if run.exit_code != 0:
            return run
    return by_finish[-1]


def _disruption(view: PodView) -> tuple[str, datetime | None] | None:
    for condition in view.conditions:
        if condition.get("type") == "DisruptionTarget" and condition.get("status") == "True":
            reason = condition.get("reason")
            return (
                reason if isinstance(reason, str) else "DisruptionTarget",
                optional_time(condition.get("lastTransitionTime")),
            )
    return None


def job_identity(view: PodView) -> tuple[str, str, str]:
    """``(retry group, logical_job, job_name)``: a Job's pods share ``<ns>/<job>``; any other pod
    is its own logical job (and pods re-created under the same name continue its attempts)."""
    job = view.owner_name if view.owner_kind == "Job" else None
    job = job or next((view.labels[k] for k in JOB_NAME_LABELS if view.labels.get(k)), None)
    if job:
        logical = f"{view.namespace}/{job}"
        return logical, logical, job
    return view.key, view.key, view.owner_name or view.name


def owner(view: PodView, default_kind: str | None) -> dict[str, Any]:
    labels = {k: v for k, v in view.labels.items() if k not in NOISE_LABELS}
    user = next((m[k] for k in USER_KEYS for m in (view.labels, view.annotations) if m.get(k)), None)
    return {
        "namespace": view.namespace,
        "labels": labels,
        "user": user,
        "queue": view.labels.get(QUEUE_LABEL) or view.priority_class,
        "workload_kind": _kind(view, default_kind),
    }


def _kind(view: PodView, default_kind: str | None) -> str:
    for key in KIND_LABELS:
        value = (view.labels.get(key) or "").lower()
        if value in WORKLOAD_KINDS:
            return value
    if default_kind:
        return default_kind
    if view.labels.get("notebook-name"):
        return "notebook"
    if view.owner_kind == "Job" or any(view.labels.get(k) for k in JOB_NAME_LABELS):
        return "batch"
    return "unknown"
