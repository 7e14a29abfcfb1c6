"""The Kubernetes collector's list + watch loop, through the real ``kubernetes`` client library.

The Kubernetes API server itself cannot run here. What is faked is only the server's answers:
a small HTTP server on 127.0.0.1 replays scripted responses to ``GET /api/v1/pods`` (a PodList
for a list, newline-delimited watch events for ``?watch=true``, or an HTTP status), shaped as the
API server documents them. The client library (``CoreV1Api``, ``watch.Watch``, urllib3) is real.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import orjson
import pytest
from kubernetes import client

from pipelines.collectors.kubernetes import PodWatcher
from pipelines.errors import SourceUnavailable

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
# ("list", PodList) | ("watch", [events]) | ("cut", [events]: the connection drops) | ("status", (code, body))
Response = tuple[str, Any]


class FakeApiServer:
    def __init__(self, script: list[Response]) -> None:
        self.script: deque[Response] = deque(script)
        self.requests: list[dict[str, list[str]]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # chunked watch streams, as the API server sends them

            def do_GET(self) -> None:  # noqa: N802
                owner.handle(self)

            def log_message(self, format: str, *args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        parsed = urlparse(request.path)
        query = parse_qs(parsed.query)
        self.requests.append({"path": [parsed.path], **query})
        kind, payload = self.script.popleft() if self.script else ("status", (500, b"script exhausted"))
        watching = query.get("watch") == ["true"]
        if kind in ("watch", "cut") and not watching or kind == "list" and watching:
            kind, payload = "status", (500, f"expected a {kind} request".encode())
        if kind == "status":
            code, body = payload
            request.send_response(code)
            request.send_header("Content-Type", "application/json")
            request.send_header("Content-Length", str(len(body)))
            request.end_headers()
            request.wfile.write(body)
            return
        if kind == "list":
            body = orjson.dumps(payload)
            request.send_response(200)
            request.send_header("Content-Type", "application/json")
            request.send_header("Content-Length", str(len(body)))
            request.end_headers()
            request.wfile.write(body)
            return
        request.send_response(200)
        request.send_header("Content-Type", "application/json")
        request.send_header("Transfer-Encoding", "chunked")
        request.end_headers()
        for event in payload:  # one chunk per event
            line = orjson.dumps(event) + b"\n"
            request.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
            request.wfile.flush()
        if kind == "watch":  # the server's timeoutSeconds ran out: a clean end of the stream
            request.wfile.write(b"0\r\n\r\n")
        request.close_connection = True  # "cut": the connection drops without the final chunk

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def pod(
    name: str,
    *,
    rv: str,
    created: str,
    started: str | None = None,
    node: str | None = None,
    finished: str | None = None,
    gpus: int = 2,
) -> dict[str, Any]:
    """A Pod object as the API serves it: one container holding ``gpus`` nvidia.com/gpu."""
    status: dict[str, Any] = {"phase": "Pending", "qosClass": "Guaranteed", "conditions": []}
    if started:
        status.update(
            phase="Running",
            startTime=started,
            containerStatuses=[
                {
                    "name": "main",
                    "image": "registry.local/train:2.1",
                    "ready": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": started}},
                    "lastState": {},
                }
            ],
        )
    if finished:
        status["phase"] = "Succeeded"
        status["containerStatuses"][0].update(
            ready=False,
            state={"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": started, "finishedAt": finished}},
        )
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": "registry.local/train:2.1",
                "resources": {
                    "limits": {"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": str(gpus)},
                    "requests": {"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": str(gpus)},
                },
            }
        ],
        "restartPolicy": "Never",
        "schedulerName": "default-scheduler",
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "llm-train",
            "uid": f"uid-{name}",
            "resourceVersion": rv,
            "creationTimestamp": created,
            "labels": {"team": "llm"},
        },
        "spec": spec,
        "status": status,
    }


def pod_list(rv: str, *items: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": rv}, "items": list(items)}


def gone(message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "Expired",
        "code": 410,
    }


A_RUNNING = pod("train-a", rv="90", created="2026-03-02T08:00:00Z", started="2026-03-02T08:01:00Z", node="gpu001")
A_DONE = pod(
    "train-a",
    rv="130",
    created="2026-03-02T08:00:00Z",
    started="2026-03-02T08:01:00Z",
    node="gpu001",
    finished="2026-03-02T08:30:00Z",
)
B_RUNNING = pod("train-b", rv="120", created="2026-03-02T08:02:00Z", started="2026-03-02T08:03:00Z", node="gpu002")
BOOKMARK = {"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "150"}}}


@pytest.fixture
def fake_api(request: pytest.FixtureRequest) -> Iterator[tuple[FakeApiServer, Any]]:
    server = FakeApiServer(request.param)
    configuration = client.Configuration()
    configuration.host = server.url
    api = client.CoreV1Api(client.ApiClient(configuration))
    try:
        yield server, api
    finally:
        api.api_client.close()
        server.close()


def _watcher(api: Any) -> PodWatcher:
    return PodWatcher(api, cluster="c1", watch_timeout_s=5, clock=lambda: NOW.timestamp())


def _kinds(batch_events: list[Any]) -> list[tuple[str, str]]:
    return [(e.type, e.data.job_id) for e in batch_events]


SCRIPT: list[Response] = [
    ("list", pod_list("100", A_RUNNING)),
    ("watch", [{"type": "ADDED", "object": B_RUNNING}, {"type": "MODIFIED", "object": A_DONE}, BOOKMARK]),
    ("watch", [{"type": "ERROR", "object": gone("too old resource version: 150 (250)")}]),
    ("list", pod_list("300", A_DONE)),  # train-b vanished while nobody watched
    ("status", (410, orjson.dumps(gone("too old resource version: 300 (390)")))),
    ("list", pod_list("400")),
]


@pytest.mark.parametrize("fake_api", [SCRIPT], indirect=True)
def test_list_watch_bookmark_and_relist_after_410(fake_api: tuple[FakeApiServer, Any]) -> None:
    server, api = fake_api
    watcher = _watcher(api)
    batches = [watcher.poll() for _ in range(len(SCRIPT))]
    assert not server.script, "every scripted answer was asked for"
    got = [_kinds(b.result.events) for b in batches]
    assert got[0] == [("allocation.pending", "llm-train/train-a"), ("allocation.running", "llm-train/train-a")]
    assert got[1] == [
        ("allocation.pending", "llm-train/train-b"),
        ("allocation.running", "llm-train/train-b"),
        ("allocation.ended", "llm-train/train-a"),
    ]
    assert got[2] == [] and got[4] == [] and got[5] == []  # 410s re-list; a re-listed pod repeats nothing
    assert got[3] == [("allocation.ended", "llm-train/train-b")]
    ended_b = batches[3].result.events[0].data
    assert ended_b.end_time == NOW and ended_b.outcome == "failure" and ended_b.failure_reason == "cancelled"
    ended_a = batches[1].result.events[2].data
    assert ended_a.outcome == "success" and ended_a.end_time == datetime(2026, 3, 2, 8, 30, tzinfo=UTC)
    assert all(b.more for b in batches)  # every poll asks to be followed by the next at once
    assert all(not b.result.dead_letters for b in batches)

    lists = [r for r in server.requests if "watch" not in r]
    watches = [r for r in server.requests if "watch" in r]
    assert [r["path"] for r in server.requests] == [["/api/v1/pods"]] * len(SCRIPT)
    assert len(lists) == 3 and all(r["limit"] == ["500"] for r in lists)
    assert [r["resourceVersion"] for r in watches] == [["100"], ["150"], ["300"]]  # the bookmark moved it
    assert all(r["allowWatchBookmarks"] == ["true"] and r["timeoutSeconds"] == ["5"] for r in watches)
    assert watcher.resource_version == "400"


@pytest.mark.parametrize(
    "fake_api",
    [
        [
            ("list", {**pod_list("100", A_RUNNING), "metadata": {"resourceVersion": "", "continue": "page-2"}}),
            ("list", pod_list("101", B_RUNNING)),
        ]
    ],
    indirect=True,
)
def test_list_follows_continue_tokens(fake_api: tuple[FakeApiServer, Any]) -> None:
    server, api = fake_api
    batch = _watcher(api).poll()
    assert {e.data.job_id for e in batch.result.events} == {"llm-train/train-a", "llm-train/train-b"}
    assert "continue" not in server.requests[0] and server.requests[1]["continue"] == ["page-2"]


@pytest.mark.parametrize(
    "fake_api",
    [
        [
            ("list", pod_list("100")),
            ("cut", [{"type": "ADDED", "object": B_RUNNING}]),
            ("status", (500, b'{"kind":"Status","code":500,"message":"etcd unavailable"}')),
        ]
    ],
    indirect=True,
)
def test_broken_watch_keeps_what_arrived_and_a_failed_one_is_retryable(fake_api: tuple[FakeApiServer, Any]) -> None:
    _, api = fake_api
    watcher = _watcher(api)
    watcher.poll()
    cut = watcher.poll()
    assert _kinds(cut.result.events) == [
        ("allocation.pending", "llm-train/train-b"),
        ("allocation.running", "llm-train/train-b"),
    ]
    assert cut.warnings and "watch broke" in cut.warnings[0]
    assert watcher.resource_version == "120"
    with pytest.raises(SourceUnavailable, match="HTTP 500"):
        watcher.poll()
    assert watcher.resource_version == "120"  # the next poll resumes from the same place


def test_unreachable_api_server_is_source_unavailable() -> None:
    configuration = client.Configuration()
    configuration.host = "http://127.0.0.1:9"  # discard port: nothing listens
    configuration.retries = 0
    api = client.CoreV1Api(client.ApiClient(configuration))
    try:
        with pytest.raises(SourceUnavailable, match="unreachable"):
            _watcher(api).poll()
    finally:
        api.api_client.close()


DB_OLD = {**pod("db-0", rv="95", created="2026-03-02T08:00:00Z", started="2026-03-02T08:00:30Z", node="gpu003", gpus=1)}
DB_NEW = pod("db-0", rv="210", created="2026-03-02T10:00:00Z", started="2026-03-02T10:00:20Z", node="gpu003", gpus=1)
DB_NEW["metadata"]["uid"] = "uid-db-0-recreated"


@pytest.mark.parametrize(
    "fake_api",
    [
        [
            ("list", pod_list("100", A_RUNNING, DB_OLD)),
            ("list", pod_list("220", DB_NEW)),  # after the restart: train-a and the first db-0 are gone
        ]
    ],
    indirect=True,
)
def test_a_restarted_collector_ends_what_vanished_and_numbers_a_recreated_pod_on(
    fake_api: tuple[FakeApiServer, Any], tmp_path: Any
) -> None:
    _, api = fake_api
    state = tmp_path / "k8s-c1.json"
    before = PodWatcher(api, cluster="c1", watch_timeout_s=5, clock=lambda: NOW.timestamp(), state_file=state)
    first = before.poll()
    assert first.commit is not None
    first.commit()  # the sink published the batch: the state is saved
    later = NOW.replace(hour=12)
    after = PodWatcher(api, cluster="c1", watch_timeout_s=5, clock=lambda: later.timestamp(), state_file=state)
    batch = after.poll()
    ended = {e.data.job_id: e.data for e in batch.result.events if e.type == "allocation.ended"}
    # deleted while the collector was down: ended at the last time they were known to exist
    assert set(ended) == {"llm-train/train-a", "llm-train/db-0"}
    assert all(d.end_time == NOW for d in ended.values())
    running = [e for e in batch.result.events if e.type == "allocation.running"]
    [new] = [e for e in running if e.data.uid == "uid-db-0-recreated"]
    assert (new.data.attempt, ended["llm-train/db-0"].attempt) == (2, 1)
    assert new.id not in {e.id for e in first.result.events}  # never deduplicated into its predecessor


@pytest.mark.parametrize(
    "fake_api",
    [
        [
            ("list", pod_list("100", A_RUNNING, B_RUNNING)),
            ("list", pod_list("220", A_DONE, B_RUNNING)),  # after the restart: train-a ended meanwhile
        ]
    ],
    indirect=True,
)
def test_a_restarted_collector_publishes_only_what_it_had_not(
    fake_api: tuple[FakeApiServer, Any], tmp_path: Any
) -> None:
    _, api = fake_api
    state = tmp_path / "k8s-c1.json"
    before = PodWatcher(api, cluster="c1", watch_timeout_s=5, clock=lambda: NOW.timestamp(), state_file=state)
    first = before.poll()
    assert len(first.result.events) == 4 and first.commit is not None
    first.commit()
    after = PodWatcher(api, cluster="c1", watch_timeout_s=5, clock=lambda: NOW.timestamp(), state_file=state)
    batch = after.poll()
    assert _kinds(batch.result.events) == [("allocation.ended", "llm-train/train-a")]
    ended = batch.result.events[0].data
    assert ended.attempt == 1 and ended.end_time == datetime(2026, 3, 2, 8, 30, tzinfo=UTC)


def node(
    name: str, *, ready: str = "True", cordoned: bool = False, gpus: str = "8", labels: dict[str, str] | None = None
) -> dict[str, Any]:
    """A Node object as the API serves it (GPU feature discovery labels optional)."""
    why = "KubeletReady" if ready == "True" else "NodeStatusUnknown"
    conditions = [
        {"type": "MemoryPressure", "status": "False"},
        {"type": "Ready", "status": ready, "reason": why, "lastTransitionTime": "2026-03-02T08:45:00Z"},
    ]
    spec: dict[str, Any] = {"podCIDR": "10.244.1.0/24"}
    if cordoned:
        spec.update(
            unschedulable=True,
            taints=[
                {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": "2026-03-02T08:50:00Z"}
            ],
        )
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels or {}},
        "spec": spec,
        "status": {
            "capacity": {"cpu": "96", "nvidia.com/gpu": gpus},
            "allocatable": {"cpu": "95", "nvidia.com/gpu": gpus},
            "conditions": conditions,
        },
    }


def node_list(*items: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "77"}, "items": list(items)}


def test_node_list_file_gives_down_drained_and_physical_gpus() -> None:
    from pipelines.events import NodeStateEvent
    from pipelines.parsers import kubernetes

    sliced = {"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    doc = node_list(
        node("gpu001"),
        node("gpu002", ready="Unknown"),
        node("gpu003", cordoned=True),
        node("gpu004", gpus="32", labels=sliced),
        node("gpu005", labels={"nvidia.com/gpu.count": "4"}),
    )
    result = kubernetes.parse(orjson.dumps(doc), cluster="c1", observed_at="2026-03-02T09:00:00Z")
    got = {e.data.node: (e.data.state, e.data.gpus) for e in result.events if isinstance(e, NodeStateEvent)}
    # time-sliced: 32 advertised replicas of 8 GPUs; GPU feature discovery's count wins when present
    assert got == {
        "gpu001": ("up", 8),
        "gpu002": ("down", 8),
        "gpu003": ("drained", 8),
        "gpu004": ("up", 8),
        "gpu005": ("up", 4),
    }
    undated = kubernetes.parse(orjson.dumps(doc), cluster="c1")  # no capture time: only dated states
    assert {e.data.node: str(e.time) for e in undated.events} == {
        "gpu002": "2026-03-02 08:45:00+00:00",
        "gpu003": "2026-03-02 08:50:00+00:00",
    }


@pytest.mark.parametrize(
    "fake_api",
    [
        [
            ("list", pod_list("100")),
            ("list", node_list(node("gpu001"), node("gpu002"))),
            ("watch", []),
            ("list", node_list(node("gpu001"), node("gpu002", cordoned=True))),
            ("watch", []),
            ("status", (403, b'{"kind":"Status","code":403,"message":"nodes is forbidden"}')),
        ]
    ],
    indirect=True,
)
def test_the_collector_passes_on_node_states_that_changed(fake_api: tuple[FakeApiServer, Any]) -> None:
    _, api = fake_api
    watcher = PodWatcher(api, cluster="c1", watch_timeout_s=5, clock=lambda: NOW.timestamp(), nodes=True)
    states = []
    for _ in range(3):
        batch = watcher.poll()
        states.append(
            ([(e.data.node, e.data.state) for e in batch.result.events if e.type == "node.state"], batch.warnings)
        )
    assert states[0] == ([("gpu001", "up"), ("gpu002", "up")], [])
    assert states[1] == ([("gpu002", "drained")], [])
    assert states[2][0] == [] and "listing nodes failed: HTTP 403" in states[2][1][0]


@pytest.mark.parametrize(
    "fake_api",
    [
        [
            ("list", pod_list("100", A_RUNNING)),
            ("list", node_list(node("gpu001"))),
            (
                "watch",
                [
                    {
                        "type": "ADDED",
                        "object": pod(
                            "train-c",
                            rv="110",
                            created="2026-03-02T08:04:00Z",
                            started="2026-03-02T08:05:00Z",
                            node="gpu001",
                        ),
                    }
                ],
            ),
            ("list", node_list(node("gpu001", cordoned=True))),
        ]
    ],
    indirect=True,
)
def test_a_per_node_collector_asks_only_for_its_node(fake_api: tuple[FakeApiServer, Any]) -> None:
    server, api = fake_api
    watcher = PodWatcher(
        api,
        cluster="c1",
        watch_timeout_s=5,
        clock=lambda: NOW.timestamp(),
        nodes=True,
        node_name="gpu001",
        label_selector="team=llm",
    )
    first, second = watcher.poll(), watcher.poll()
    pods = [r for r in server.requests if r["path"] == ["/api/v1/pods"]]
    nodes = [r for r in server.requests if r["path"] == ["/api/v1/nodes"]]
    assert len(pods) == 2 and len(nodes) == 2
    assert all(r["fieldSelector"] == ["spec.nodeName=gpu001"] and r["labelSelector"] == ["team=llm"] for r in pods)
    assert all(r["fieldSelector"] == ["metadata.name=gpu001"] for r in nodes)
    assert [e.data.state for e in second.result.events if e.type == "node.state"] == ["drained"]
    assert {e.data.job_id for e in first.result.events + second.result.events if e.type == "allocation.running"} == {
        "llm-train/train-a",
        "llm-train/train-c",
    }
