"""Kubernetes parser and PodTracker: pod lists, watch streams, restarts, Job retries, GPUs, outcomes."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from pipelines.events import AllocationEvent
from pipelines.parsers import kubernetes
from pipelines.parsers.base import NotThisFormat
from pipelines.parsers.kubernetes import PodTracker, parse_pod_resources
from pipelines.parsers.kubernetes_pod import pod_gpus

FIXTURES = Path(__file__).parent.parent / "fixtures" / "kubernetes"
BASE = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return BASE + timedelta(minutes=minutes)


def iso(minutes: float) -> str:
    return at(minutes).isoformat().replace("+00:00", "Z")


def load(name: str, **hints: Any) -> list[AllocationEvent]:
    result = kubernetes.parse((FIXTURES / name).read_bytes(), cluster="c1", origin=name, **hints)
    assert [d for d in result.dead_letters if "ERROR" not in d.reason] == []
    return result.events  # type: ignore[return-value]


def attempts(events: list[AllocationEvent], job_id: str) -> list[tuple[str, int]]:
    return [(e.type, e.data.attempt) for e in events if e.data.job_id == job_id]


def ended(events: list[AllocationEvent], job_id: str) -> dict[int, AllocationEvent]:
    return {e.data.attempt: e for e in events if e.type == "allocation.ended" and e.data.job_id == job_id}


def pod(
    name: str = "p",
    *,
    gpus: dict[str, str] | None = None,
    phase: str = "Running",
    node: str | None = "gpu1",
    start: float | None = 1,
    statuses: list[dict[str, Any]] | None = None,
    **meta: Any,
) -> dict[str, Any]:
    """A minimal pod in API shape: one container `main` with the given GPU limits."""
    limits = {"nvidia.com/gpu": "1"} if gpus is None else gpus
    status: dict[str, Any] = {"phase": phase, "containerStatuses": statuses or []}
    if start is not None:
        status["startTime"] = iso(start)
    for key in ("reason", "message", "conditions"):
        if key in meta:
            status[key] = meta.pop(key)
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "resources": {"limits": limits}}],
        "restartPolicy": meta.pop("policy", "Never"),
    }
    if node:
        spec["nodeName"] = node
    metadata = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "creationTimestamp": iso(0), **meta}
    return {"kind": "Pod", "apiVersion": "v1", "metadata": metadata, "spec": spec, "status": status}


def terminated(code: int | None, reason: str, started: float, finished: float) -> dict[str, Any]:
    body: dict[str, Any] = {"reason": reason, "startedAt": iso(started), "finishedAt": iso(finished)}
    if code is not None:
        body["exitCode"] = code
    return {"terminated": body}


def status(
    restarts: int = 0, state: dict[str, Any] | None = None, last: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "name": "main",
        "restartCount": restarts,
        "state": state or {"running": {"startedAt": iso(1)}},
        "lastState": last or {},
    }


def parse_one(obj: dict[str, Any], **hints: Any) -> list[AllocationEvent]:
    result = kubernetes.parse(orjson.dumps(obj), cluster="c1", **hints)
    assert result.dead_letters == []
    return result.events  # type: ignore[return-value]


# --------------------------------------------------------------------------------- snapshot fixture
def test_snapshot_job_retries_numbered_by_creation_time() -> None:
    events = load("pods_snapshot.json")
    first, retry = "llm-train/llm-pretrain-x7k2p", "llm-train/llm-pretrain-b8m2q"
    assert attempts(events, first) == [("allocation.pending", 1), ("allocation.running", 1), ("allocation.ended", 1)]
    assert attempts(events, retry) == [("allocation.pending", 2), ("allocation.running", 2), ("allocation.ended", 2)]
    oom, ok = ended(events, first)[1].data, ended(events, retry)[2].data
    assert {oom.logical_job, ok.logical_job} == {"llm-train/llm-pretrain"}
    assert (oom.failure_reason, oom.exit_code) == ("oom", 137)
    assert (oom.start_time, oom.end_time) == (at(5 / 60), at(30))
    assert (ok.outcome, ok.scheduler_state, ok.end_time) == ("success", "Completed", at(90))
    assert ok.device_ids == [f"GPU-b{i}" for i in range(8)]
    assert ok.gpus[0].gpu_type == "NVIDIA-H100-80GB-HBM3" and ok.gpus[0].count == 8
    owner = ok.owner
    assert (owner.namespace, owner.queue, owner.workload_kind) == ("llm-train", "llm-queue", "training")
    assert owner.labels["team"] == "llm" and "controller-uid" not in owner.labels


def test_snapshot_restarts_show_only_the_last_terminated_run() -> None:
    events = load("pods_snapshot.json")
    key = "serving/chat-6d9f8c7b5-q2w4e"  # restartCount 3, lastState Error 08:30-08:40
    assert attempts(events, key) == [
        ("allocation.pending", 1),
        ("allocation.running", 2),
        ("allocation.ended", 2),
        ("allocation.running", 3),
        ("allocation.ended", 3),
        ("allocation.running", 4),
    ]
    merged, last = ended(events, key)[2].data, ended(events, key)[3].data
    assert (merged.start_time, merged.end_time, merged.failure_reason) == (at(1), at(30), "unknown")
    assert (last.start_time, last.end_time) == (at(30), at(40))
    assert (last.failure_reason, last.exit_code) == ("app_error", 1)
    current = [e for e in events if e.data.job_id == key and e.type == "allocation.running"][-1]
    assert current.data.start_time == at(40) and current.data.owner.user == "frank"
    assert (current.data.owner.workload_kind, current.data.owner.queue) == ("inference", "serving-high")


def test_snapshot_mig_shared_eviction_pending_and_cpu_pods() -> None:
    events = load("pods_snapshot.json")
    running = {e.data.job_id: e for e in events if e.type == "allocation.running"}
    mig = running["research/notebook-ana-0"]
    assert [(g.kind, g.count, g.profile) for g in mig.data.gpus] == [("mig", 1, "3g.40gb")]
    assert mig.data.requested_gpus == pytest.approx(3 / 7) and mig.data.owner.workload_kind == "notebook"
    shared = running["serving/embed-7c4d"]
    assert [(g.kind, g.replicas) for g in shared.data.gpus] == [("shared", 2)]
    assert shared.data.device_ids == ["GPU-e1::2"] and shared.data.requested_gpus == pytest.approx(0.5)
    evicted = ended(events, "search/batch-embed-9k")[1].data
    assert (evicted.failure_reason, evicted.scheduler_state, evicted.end_time) == (
        "preempted",
        "Evicted",
        at(20 + 3 / 60),
    )
    assert attempts(events, "llm-train/eval-queue-abc") == [("allocation.pending", 1)]
    assert not [e for e in events if e.data.job_id == "default/web-1"]  # no GPU: no events


def test_single_pod_object() -> None:
    events = load("pod_single.json")
    assert [e.type for e in events] == ["allocation.pending", "allocation.running"]
    assert events[1].data.node == "gpu004" and events[1].data.submit_time == at(5)


# --------------------------------------------------------------------------------- watch fixture
def test_watch_stream_sees_every_restart() -> None:
    events = load("watch_events.jsonl")
    key = "llm-train/ft-run-0"
    assert attempts(events, key) == [
        ("allocation.pending", 1),
        ("allocation.running", 1),
        ("allocation.ended", 1),
        ("allocation.running", 2),
        ("allocation.ended", 2),
        ("allocation.running", 3),
        ("allocation.ended", 3),
    ]
    runs = ended(events, key)
    spans = [(runs[a].data.start_time, runs[a].data.end_time, runs[a].data.failure_reason) for a in (1, 2, 3)]
    assert spans == [(at(1), at(10), "oom"), (at(10), at(20), "app_error"), (at(20), at(50), None)]
    assert runs[3].data.outcome == "success"
    assert runs[3].data.device_ids == ["GPU-f0", "GPU-f1", "GPU-f2", "GPU-f3"]


def test_watch_stream_and_snapshot_agree_on_the_last_attempts() -> None:
    lines = (FIXTURES / "watch_events.jsonl").read_text().splitlines()
    pods = [orjson.loads(line)["object"] for line in lines if '"name":"ft-run-0"' in line]
    final = pods[-2]  # the last state before DELETED
    snapshot: dict[tuple[str, int], AllocationEvent] = {
        (e.type, e.data.attempt): e for e in parse_one({"kind": "PodList", "items": [final]})
    }
    streamed: dict[tuple[str, int], AllocationEvent] = {
        (e.type, e.data.attempt): e for e in load("watch_events.jsonl") if e.data.job_id == "llm-train/ft-run-0"
    }
    assert snapshot.keys() <= streamed.keys()
    assert all(snapshot[key].id == streamed[key].id for key in snapshot)  # ids come from the natural key
    for key in [("allocation.running", 3), ("allocation.ended", 3)]:
        assert snapshot[key].data == streamed[key].data
    last, seen = snapshot[("allocation.ended", 2)].data, streamed[("allocation.ended", 2)].data
    assert (last.end_time, last.failure_reason, last.exit_code) == (seen.end_time, seen.failure_reason, 1)
    assert last.start_time == at(10 + 10 / 60) and seen.start_time == at(10)  # back-off unknown to a snapshot
    merged = snapshot[("allocation.ended", 1)].data
    assert (merged.start_time, merged.end_time, merged.failure_reason) == (at(1), at(10 + 10 / 60), "unknown")
    assert streamed[("allocation.ended", 1)].data.failure_reason == "oom"


def test_deleted_while_running_is_cancelled() -> None:
    runs = ended(load("watch_events.jsonl"), "research/nb-bob-0")
    assert list(runs) == [1]
    data = runs[1].data
    assert (data.failure_reason, data.exit_code, data.scheduler_state, data.end_time) == (
        "cancelled",
        143,
        "Deleted",
        at(45 + 2 / 60),
    )


def test_watch_job_retry_and_error_event() -> None:
    result = kubernetes.parse((FIXTURES / "watch_events.jsonl").read_bytes(), cluster="c1", origin="w.jsonl")
    events: list[AllocationEvent] = result.events  # type: ignore[assignment]
    assert ended(events, "llm-train/eval-mmlu-aaaaa")[1].data.failure_reason == "app_error"
    retry = ended(events, "llm-train/eval-mmlu-bbbbb")[2].data
    assert (retry.logical_job, retry.outcome) == ("llm-train/eval-mmlu", "success")
    assert retry.owner.workload_kind == "batch"
    assert [(d.reason.split(":")[0], d.origin) for d in result.dead_letters] == [
        ("watch ERROR event 410", "w.jsonl:17")
    ]


def test_pretty_printed_watch_events_parse_like_json_lines() -> None:
    lines = (FIXTURES / "watch_events.jsonl").read_text().splitlines()
    pretty = "\n".join(orjson.dumps(orjson.loads(line), option=orjson.OPT_INDENT_2).decode() for line in lines)
    compact = kubernetes.parse("\n".join(lines), cluster="c1")
    again = kubernetes.parse(pretty, cluster="c1")
    assert [e.id for e in again.events] == [e.id for e in compact.events]
    assert len(again.dead_letters) == len(compact.dead_letters) == 1


def test_bookmark_emits_nothing_and_garbage_line_is_a_dead_letter_with_its_line() -> None:
    bookmark = '{"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"12"}}}'
    result = kubernetes.parse(bookmark, cluster="c1")
    assert result.events == [] and result.dead_letters == []
    added = orjson.dumps({"type": "ADDED", "object": pod("a")}).decode()
    text = "\n".join([added, '{"type":"MODIFIED","obj', bookmark])
    result = kubernetes.parse(text, cluster="c1", origin="f")
    assert [d.origin for d in result.dead_letters] == ["f:2"] and len(result.events) == 2


# --------------------------------------------------------------------------------- tracker
def test_tracker_emits_each_state_change_once() -> None:
    tracker = PodTracker(cluster="c1")
    running = pod("t")
    first = tracker.feed({"type": "ADDED", "object": running}).events
    assert [e.type for e in first] == ["allocation.pending", "allocation.running"]
    assert tracker.feed({"type": "MODIFIED", "object": running}).events == []
    done = copy.deepcopy(running)
    done["status"].update(phase="Succeeded", containerStatuses=[status(state=terminated(0, "Completed", 1, 9))])
    assert [e.type for e in tracker.feed({"type": "MODIFIED", "object": done}).events] == ["allocation.ended"]
    assert tracker.feed({"type": "DELETED", "object": done}).events == []


def test_tracker_missed_restarts_close_the_open_attempt() -> None:
    tracker = PodTracker(cluster="c1")
    tracker.observe(pod("m", policy="Always", statuses=[status()]))
    later = pod(
        "m", policy="Always", statuses=[status(3, {"running": {"startedAt": iso(31)}}, terminated(1, "Error", 20, 30))]
    )
    events = tracker.observe(later).events
    assert [(e.type, e.data.attempt) for e in events] == [
        ("allocation.ended", 1),
        ("allocation.running", 3),
        ("allocation.ended", 3),
        ("allocation.running", 4),
    ]
    assert (events[0].data.end_time, events[0].data.failure_reason) == (at(20), "unknown")


def test_a_restarted_run_that_exited_zero_is_not_a_success() -> None:
    tracker = PodTracker(cluster="c1")
    tracker.observe(pod("z", policy="Always", statuses=[status()]))
    later = pod(
        "z", policy="Always", statuses=[status(1, {"running": {"startedAt": iso(9)}}, terminated(0, "Completed", 1, 8))]
    )
    first = [e for e in tracker.observe(later).events if e.type == "allocation.ended"][0].data
    assert (first.outcome, first.failure_reason, first.exit_code, first.end_time) == ("failure", "unknown", 0, at(8))


def test_job_retry_after_restarts_continues_the_numbering() -> None:
    owner = [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": True}]
    first = pod(
        "j-1",
        ownerReferences=owner,
        phase="Failed",
        policy="OnFailure",
        statuses=[status(2, terminated(1, "Error", 20, 30), terminated(1, "Error", 10, 19))],
    )
    second = pod("j-2", ownerReferences=owner, creationTimestamp=iso(31), start=32)
    events = parse_one({"kind": "PodList", "items": [second, first]})
    by_pod = {
        job: sorted(e.data.attempt for e in events if e.data.job_id == job and e.type == "allocation.running")
        for job in ("ns/j-1", "ns/j-2")
    }
    assert by_pod == {"ns/j-1": [1, 2, 3], "ns/j-2": [4]}
    assert {e.data.logical_job for e in events} == {"ns/j"}


# --------------------------------------------------------------------------------- GPUs
@pytest.mark.parametrize(
    "limits, annotations, replicas, expected",
    [
        ({"nvidia.com/gpu": "2"}, {}, None, [("gpu", 2, None, None)]),
        ({"nvidia.com/gpu": 4}, {}, None, [("gpu", 4, None, None)]),
        ({"nvidia.com/mig-3g.40gb": "1"}, {}, None, [("mig", 1, "3g.40gb", None)]),
        ({"nvidia.com/mig-1g.10gb+me": "2"}, {}, None, [("mig", 2, "1g.10gb+me", None)]),
        ({"nvidia.com/gpu.shared": "1"}, {"gpuledger.io/replicas": "8"}, 2, [("shared", 1, None, 8)]),
        ({"nvidia.com/gpu.shared": "2"}, {}, 2, [("shared", 2, None, 2)]),
        # no annotation, no hint: the node's replicas in force decide (4 when no source states them)
        ({"nvidia.com/gpu.shared": "1"}, {}, None, [("shared", 1, None, None)]),
        ({"cpu": "4", "memory": "1Gi"}, {}, None, []),
    ],
)
def test_gpu_limits(
    limits: dict[str, Any], annotations: dict[str, str], replicas: int | None, expected: list[tuple[Any, ...]]
) -> None:
    spec = {"containers": [{"name": "a", "resources": {"limits": limits}}]}
    gpus, _ = pod_gpus(spec, annotations, replicas)
    assert [(g["kind"], g["count"], g["profile"], g["replicas"]) for g in gpus] == expected


def test_gpus_sum_containers_and_take_the_largest_init_container() -> None:
    spec = {
        "containers": [
            {"name": "a", "resources": {"limits": {"nvidia.com/gpu": "2"}}},
            {"name": "b", "resources": {"requests": {"nvidia.com/gpu": "1"}}},
        ],
        "initContainers": [{"name": "i", "resources": {"limits": {"nvidia.com/gpu": "4"}}}],
    }
    gpus, holders = pod_gpus(spec, {}, None)
    assert [(g["kind"], g["count"]) for g in gpus] == [("gpu", 4)] and holders == {"a", "b"}


@pytest.mark.parametrize(
    "limits, reason", [({"nvidia.com/mig-9g.90gb": "1"}, "MIG profile"), ({"nvidia.com/gpu": "1.5"}, "whole number")]
)
def test_bad_gpu_limits_are_dead_letters(limits: dict[str, str], reason: str) -> None:
    result = kubernetes.parse(orjson.dumps(pod(gpus=limits)), cluster="c1")
    assert result.events == [] and reason in result.dead_letters[0].reason


def test_pod_resources_device_ids() -> None:
    devices = parse_pod_resources((FIXTURES / "pod_resources.json").read_bytes())
    assert devices == {
        ("llm-train", "llm-pretrain-b8m2q", "main"): [
            "GPU-1d2c3b4a-0000-1111-2222-333344445555",
            "GPU-1d2c3b4a-0000-1111-2222-333344445556",
        ],
        ("research", "notebook-ana-0", "main"): ["MIG-5c1a7e2b-0d3f-4b8e-9a61-2f4c8d7e1b30"],
        ("serving", "embed-7c4d", "main"): ["GPU-e1::2"],
    }
    camel = {
        "podResources": [
            {
                "name": "p",
                "namespace": "ns",
                "containers": [
                    {"name": "main", "devices": [{"resourceName": "nvidia.com/gpu", "deviceIds": ["GPU-x"]}]}
                ],
            }
        ]
    }
    assert parse_pod_resources(camel) == {("ns", "p", "main"): ["GPU-x"]}
    events = parse_one(pod("p"), devices=parse_pod_resources(camel))
    assert [e.data.device_ids for e in events if e.type == "allocation.running"] == [["GPU-x"]]
    with pytest.raises(NotThisFormat):
        parse_pod_resources({"items": []})


# --------------------------------------------------------------------------------- failure classes
def _ended_pod(**kwargs: Any) -> dict[str, Any]:
    return pod("f", phase=kwargs.pop("phase", "Failed"), **kwargs)


@pytest.mark.parametrize(
    "obj, outcome, reason, state",
    [
        (_ended_pod(statuses=[status(state=terminated(137, "OOMKilled", 1, 5))]), "failure", "oom", "OOMKilled"),
        (
            _ended_pod(phase="Succeeded", statuses=[status(state=terminated(0, "Completed", 1, 5))]),
            "success",
            None,
            "Completed",
        ),
        (_ended_pod(statuses=[status(state=terminated(3, "Error", 1, 5))]), "failure", "app_error", "Error"),
        (
            _ended_pod(
                reason="Evicted",
                message="The node was low on resource: memory.",
                statuses=[status(state=terminated(137, "ContainerStatusUnknown", 1, 5))],
            ),
            "failure",
            "preempted",
            "Evicted",
        ),
        (
            _ended_pod(
                conditions=[
                    {
                        "type": "DisruptionTarget",
                        "status": "True",
                        "reason": "PreemptionByScheduler",
                        "lastTransitionTime": iso(4),
                    }
                ],
                statuses=[status(state=terminated(143, "Error", 1, 5))],
            ),
            "failure",
            "preempted",
            "PreemptionByScheduler",
        ),
        (
            _ended_pod(
                reason="NodeLost",
                message="Node gpu1 which was running pod f is unresponsive",
                conditions=[{"type": "Ready", "status": "False", "lastTransitionTime": iso(6)}],
            ),
            "failure",
            "node_failure",
            "NodeLost",
        ),
        (
            _ended_pod(
                reason="Terminated",
                message="Pod was terminated in response to imminent node shutdown.",
                conditions=[{"type": "Ready", "status": "False", "lastTransitionTime": iso(6)}],
            ),
            "failure",
            "node_failure",
            "Terminated",
        ),
        (
            _ended_pod(
                conditions=[
                    {
                        "type": "DisruptionTarget",
                        "status": "True",
                        "reason": "DeletionByTaintManager",
                        "lastTransitionTime": iso(4),
                    }
                ]
            ),
            "failure",
            "node_failure",
            "DeletionByTaintManager",
        ),
        (
            _ended_pod(
                reason="DeadlineExceeded",
                message="Pod was active on the node longer than the deadline",
                statuses=[status(state=terminated(137, "Error", 1, 5))],
            ),
            "failure",
            "timeout",
            "DeadlineExceeded",
        ),
        (
            _ended_pod(statuses=[status(state=terminated(None, "ContainerStatusUnknown", 1, 5))]),
            "failure",
            "unknown",
            "ContainerStatusUnknown",
        ),
    ],
)
def test_failure_classes(obj: dict[str, Any], outcome: str, reason: str | None, state: str) -> None:
    (end,) = [e for e in parse_one(obj) if e.type == "allocation.ended"]
    assert (end.data.outcome, end.data.failure_reason, end.data.scheduler_state) == (outcome, reason, state)


def test_ended_pod_without_any_time_is_a_dead_letter_unless_a_time_is_given() -> None:
    lost = _ended_pod(reason="NodeLost", message="Node gpu1 which was running pod f is unresponsive")
    result = kubernetes.parse(orjson.dumps(lost), cluster="c1")
    assert result.events == [] and "end time" in result.dead_letters[0].reason
    (end,) = [e for e in parse_one(lost, observed_at=iso(9)) if e.type == "allocation.ended"]
    assert (end.data.failure_reason, end.data.end_time) == ("node_failure", at(9))


def test_gpu_container_done_while_a_sidecar_runs_ends_the_attempt() -> None:
    obj = pod(
        "s",
        statuses=[
            status(state=terminated(0, "Completed", 1, 12)),
            {"name": "proxy", "restartCount": 0, "state": {"running": {"startedAt": iso(1)}}},
        ],
    )
    obj["spec"]["containers"].append({"name": "proxy", "resources": {"limits": {"cpu": "1"}}})
    (end,) = [e for e in parse_one(obj) if e.type == "allocation.ended"]
    assert (end.data.outcome, end.data.end_time) == ("success", at(12))
    obj["spec"]["restartPolicy"] = "Always"  # the GPU container will run again: not ended
    assert [e.type for e in parse_one(obj)] == ["allocation.pending", "allocation.running"]


def test_deleted_event_without_timestamp_uses_the_event_time() -> None:
    line = orjson.dumps({"type": "DELETED", "object": pod("d"), "time": iso(7)})
    (end,) = [e for e in kubernetes.parse(line, cluster="c1").events if e.type == "allocation.ended"]
    assert (end.data.failure_reason, end.data.end_time) == ("cancelled", at(7))


def test_completed_then_deleted_stays_a_success() -> None:
    obj = _ended_pod(
        phase="Succeeded",
        statuses=[status(state=terminated(0, "Completed", 1, 5))],
        deletionTimestamp=iso(20),
        deletionGracePeriodSeconds=30,
    )
    result = kubernetes.parse(orjson.dumps({"type": "DELETED", "object": obj}), cluster="c1")
    (end,) = [e for e in result.events if e.type == "allocation.ended"]
    assert (end.data.outcome, end.data.end_time) == ("success", at(5))


# --------------------------------------------------------------------------------- ids and formats
@pytest.mark.parametrize("name", ["pods_snapshot.json", "watch_events.jsonl", "pod_single.json"])
def test_ids_are_deterministic_and_unique(name: str) -> None:
    first, second = load(name), load(name)
    assert [e.id for e in first] == [e.id for e in second] and len({e.id for e in first}) == len(first)


@pytest.mark.parametrize(
    "data", [b"", b"hello", b"[]", b'{"jobs": []}', b'{"kind": "Node", "spec": {}}', b"\xff\x00garbage"]
)
def test_not_kubernetes(data: bytes) -> None:
    with pytest.raises(NotThisFormat):
        kubernetes.parse(data, cluster="c1")
