"""The Kubernetes collector with DRA: claims and slices listed at every poll, pods resolved through them.

Pods come from the scripted API server of test_collectors_kubernetes (the real client library);
ResourceClaims and ResourceSlices from a stub of the client's generic list call, answering what
the test says the cluster holds at that moment.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from kubernetes import client

from pipelines.collectors.kubernetes import PodWatcher
from tests.unit.test_collectors_kubernetes import FakeApiServer, Response, pod_list
from tests.unit.test_parse_kubernetes_dra import CLAIMS, SLICE, claim, pod

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def versioned(obj: dict[str, Any], rv: str) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["metadata"]["resourceVersion"] = rv
    return obj


class ClusterClaims:
    """Answers list_cluster_custom_object for resourceclaims / resourceslices from ``self.objects``."""

    def __init__(self, claims: list[dict[str, Any]], slices: list[dict[str, Any]]) -> None:
        self.objects = {"resourceclaims": claims, "resourceslices": slices}
        self.calls: list[tuple[str, str | None]] = []

    def list_cluster_custom_object(self, group: str, version: str, plural: str, **kwargs: Any) -> Any:
        assert (group, version) == ("resource.k8s.io", "v1")
        self.calls.append((plural, kwargs.get("field_selector")))
        items = [{k: v for k, v in o.items() if k != "kind"} for o in self.objects[plural]]  # as the API lists
        return SimpleNamespace(data=orjson.dumps({"kind": "List", "metadata": {}, "items": items}))


PODS = [
    versioned(pod(name, {"gpu": c}), rv)
    for name, c, rv in (("a", "whole", "10"), ("b", "shared", "11"), ("c", "shared", "12"))
]
LATE = versioned(pod("d", {"gpu": "late"}), "20")
A_DONE = versioned(PODS[0], "30")
A_DONE["status"].update(phase="Succeeded")
A_DONE["status"]["containerStatuses"][0]["state"] = {
    "terminated": {
        "exitCode": 0,
        "reason": "Completed",
        "startedAt": "2026-03-02T08:01:00Z",
        "finishedAt": "2026-03-02T08:31:00Z",
    }
}
SCRIPT: list[Response] = [
    ("list", pod_list("12", *PODS)),
    ("watch", [{"type": "ADDED", "object": LATE}]),
    ("watch", [{"type": "MODIFIED", "object": A_DONE}]),
]


@pytest.fixture
def pods_api() -> Iterator[tuple[FakeApiServer, Any]]:
    server = FakeApiServer(list(SCRIPT))
    configuration = client.Configuration()
    configuration.host = server.url
    api = client.CoreV1Api(client.ApiClient(configuration))
    try:
        yield server, api
    finally:
        api.api_client.close()
        server.close()


def test_claims_are_listed_each_poll_again_for_an_unknown_claim_and_remembered_for_the_end(
    pods_api: tuple[FakeApiServer, Any],
) -> None:
    server, api = pods_api
    cluster = ClusterClaims(list(CLAIMS), [SLICE])
    watcher = PodWatcher(api, cluster="c1", watch_timeout_s=5, clock=lambda: NOW.timestamp(), dra=True, dra_api=cluster)
    listed = watcher.poll()
    running = {
        e.data.job_id: (e.data.device_ids, e.data.claims)
        for e in listed.result.events
        if e.type == "allocation.running"
    }
    assert running == {
        "ml/a": (["GPU-a"], ["ml/whole"]),
        "ml/b": (["GPU-b"], ["ml/shared"]),
        "ml/c": (["GPU-b"], ["ml/shared"]),
    }
    assert cluster.calls == [("resourceclaims", None), ("resourceslices", "spec.driver=gpu.nvidia.com")]
    assert listed.result.notes == []  # every pod holds a GPU through its claim

    # claim "late" is allocated after this poll's list: the pod that uses it makes the collector list again
    original = cluster.list_cluster_custom_object

    def allocate_late(group: str, version: str, plural: str, **kwargs: Any) -> Any:
        if len(cluster.calls) >= 4 and plural == "resourceclaims":
            cluster.objects["resourceclaims"] = [*CLAIMS, claim("late", ["gpu-0"], "d")]
        return original(group, version, plural, **kwargs)

    cluster.list_cluster_custom_object = allocate_late  # type: ignore[method-assign]
    watched = watcher.poll()
    assert not watched.result.dead_letters
    assert [(e.type, e.data.device_ids, e.data.claims) for e in watched.result.events] == [
        ("allocation.pending", [], ["ml/late"]),
        ("allocation.running", ["GPU-a"], ["ml/late"]),
    ]
    assert len(cluster.calls) == 6  # the poll's list, then once more for pod d

    # pod a's claim is deleted before its end is seen: the end still names the GPU it held
    cluster.list_cluster_custom_object = original  # type: ignore[method-assign]
    cluster.objects["resourceclaims"] = []
    ended = watcher.poll()
    assert not ended.result.dead_letters
    assert [(e.type, e.data.device_ids, e.data.claims) for e in ended.result.events] == [
        ("allocation.ended", ["GPU-a"], ["ml/whole"])
    ]
    assert not server.script


class Forbidden(ClusterClaims):
    def list_cluster_custom_object(self, group: str, version: str, plural: str, **kwargs: Any) -> Any:
        from kubernetes.client.exceptions import ApiException

        self.calls.append((plural, kwargs.get("field_selector")))
        raise ApiException(status=403, reason="Forbidden")


def test_claims_it_may_not_list_are_one_warning_and_their_pods_dead_letters(
    pods_api: tuple[FakeApiServer, Any],
) -> None:
    server, api = pods_api
    watcher = PodWatcher(
        api, cluster="c1", watch_timeout_s=5, clock=lambda: NOW.timestamp(), dra=True, dra_api=Forbidden([], [])
    )
    listed, watched = watcher.poll(), watcher.poll()
    assert listed.warnings == ["listing resourceclaims failed: HTTP 403 Forbidden (DRA claims not refreshed)"]
    assert watched.warnings == []  # said once
    assert listed.result.events == [] and len(listed.result.dead_letters) == 3
    assert "ResourceClaim ml/whole is not in the input" in listed.result.dead_letters[0].reason
