"""The kubelet PodResources path of ``collect kubernetes``: stubs, flags, merge, and the live socket.

The socket tests run a real gRPC server on a unix socket (``fake_kubelet``: the generated servicer,
the one stand-in for a kubelet) and the pod API as the scripted HTTP server of
``test_collectors_kubernetes``, both driven through the real client libraries.
"""

from __future__ import annotations

import copy
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import typer
from kubernetes import client
from typer.testing import CliRunner

from gpuledger.cli import collect_cmd
from gpuledger.cli.main_errors import UsageFailure
from pipelines.collectors.base import collect_into, run
from pipelines.collectors.kubernetes import PodWatcher
from pipelines.collectors.podresources import generate
from pipelines.errors import SourceUnavailable
from pipelines.parsers.base import ParseResult
from pipelines.parsers.kubernetes import merge_pod_resources
from tests.unit.fake_kubelet import FakeKubelet, serving, socket_dir
from tests.unit.test_collectors_kubernetes import NOW, FakeApiServer, Response, pod, pod_list

GPU = "nvidia.com/gpu"
NS = "llm-train"
A_RUNNING = pod("train-a", rv="90", created="2026-03-02T08:00:00Z", started="2026-03-02T08:01:00Z", node="gpu001")
A_DONE = pod(
    "train-a",
    rv="130",
    created="2026-03-02T08:00:00Z",
    started="2026-03-02T08:01:00Z",
    node="gpu001",
    finished="2026-03-02T08:30:00Z",
)
B_RUNNING = pod("train-b", rv="120", created="2026-03-02T08:02:00Z", started="2026-03-02T08:03:00Z", node="gpu001")
C_RUNNING = pod(
    "train-c", rv="125", created="2026-03-02T08:04:00Z", started="2026-03-02T08:05:00Z", node="gpu001", gpus=1
)
MIG_RUNNING = copy.deepcopy(
    pod("infer-m", rv="95", created="2026-03-02T07:00:00Z", started="2026-03-02T07:00:10Z", node="gpu001")
)
for _where in ("limits", "requests"):
    _res = MIG_RUNNING["spec"]["containers"][0]["resources"][_where]
    del _res[GPU]
    _res["nvidia.com/mig-1g.10gb"] = "1"

A_IDS = ["GPU-6f0d7e1a-3b2c-4d5e-8f90-0a1b2c3d4e5f", "GPU-7a1e8f2b-4c3d-5e6f-9a01-1b2c3d4e5f60"]
B_IDS = ["GPU-8b2f9a3c-5d4e-6f70-ab12-2c3d4e5f6071"]
C_IDS = ["GPU-9c3a0b4d-6e5f-7081-bc23-3d4e5f607182::2"]  # a time-slicing replica
MIG_IDS = ["MIG-1d4b2c5e-7f60-8192-cd34-4e5f60718293"]
NIC = ("example.com/sriov-nic", ["0000:3b:00.1"])  # not a GPU: never an id


def running_ids(batch_events: list[Any]) -> dict[str, list[str]]:
    return {e.data.job_id: list(e.data.device_ids) for e in batch_events if e.type == "allocation.running"}


def ended_ids(batch_events: list[Any]) -> dict[str, list[str]]:
    return {e.data.job_id: list(e.data.device_ids) for e in batch_events if e.type == "allocation.ended"}


@pytest.fixture
def sockets() -> Iterator[Path]:
    with socket_dir() as path:
        yield path


def fake_api(script: list[Response]) -> tuple[FakeApiServer, Any]:
    server = FakeApiServer(script)
    configuration = client.Configuration()
    configuration.host = server.url
    return server, client.CoreV1Api(client.ApiClient(configuration))


def watcher(api: Any, sock: Path, **options: Any) -> PodWatcher:
    return PodWatcher(
        api,
        cluster="c1",
        watch_timeout_s=5,
        clock=lambda: NOW.timestamp(),
        node_name="gpu001",
        pod_resources_socket=sock,
        **options,
    )


# ------------------------------------------------------------------------------------------
# the generated stubs
# ------------------------------------------------------------------------------------------
def test_committed_stubs_are_what_grpcio_tools_generates_from_the_proto(tmp_path: Path) -> None:
    written = generate.generate(tmp_path)
    assert [p.name for p in written] == list(generate.OUTPUTS)
    for path in written:
        committed = generate.HERE / path.name
        assert committed.read_text() == path.read_text(), (
            f"{committed.name} is stale: run python -m pipelines.collectors.podresources.generate"
        )


def test_the_stubs_speak_the_kubelets_method_names() -> None:
    from pipelines.collectors.podresources import api_pb2

    service = api_pb2.DESCRIPTOR.services_by_name["PodResourcesLister"]
    assert service.full_name == "v1.PodResourcesLister"  # the wire path is /v1.PodResourcesLister/List
    assert {m.name for m in service.methods} >= {"List", "GetAllocatableResources"}
    fields = api_pb2.ContainerDevices.DESCRIPTOR.fields_by_name
    assert (fields["resource_name"].number, fields["device_ids"].number) == (1, 2)


# ------------------------------------------------------------------------------------------
# the CLI flags
# ------------------------------------------------------------------------------------------
@pytest.fixture
def cli() -> Callable[..., Any]:
    app = typer.Typer()

    @app.callback()
    def root() -> None:
        """gpuledger"""

    collect_cmd.register(app)
    runner = CliRunner()
    return lambda *args: runner.invoke(app, ["collect", "kubernetes", *args], env={"COLUMNS": "200"})


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--pod-resources", "dump.json", "--pod-resources-socket", "/run/k.sock", "--node-name", "n1"], "not both"),
        (["--pod-resources-socket", "/var/lib/kubelet/pod-resources/kubelet.sock"], "needs --node-name"),
        (["--node-name", "", "--pod-resources-socket", "/run/k.sock"], "is not a node name"),
        (["--node-name", "$(NODE_NAME)", "--pod-resources-socket", "/run/k.sock"], "is NODE_NAME set"),
    ],
)
def test_kubernetes_device_flags_are_checked_before_any_connection(
    cli: Callable[..., Any], args: list[str], message: str
) -> None:
    result = cli(*args, "--kubeconfig", "/nonexistent/kubeconfig", "--dry-run")
    assert isinstance(result.exception, UsageFailure), result.output
    assert message in str(result.exception) and "\n" not in str(result.exception)


def test_kubernetes_help_names_the_node_flags(cli: Callable[..., Any]) -> None:
    text = cli("--help").output
    assert "--pod-resources-socket" in text and "--node-name" in text


def test_the_collector_refuses_a_file_and_a_socket_together() -> None:
    with pytest.raises(ValueError, match="not both"):
        PodWatcher(object(), cluster="c1", pod_resources=Path("a.json"), pod_resources_socket=Path("k.sock"))


# ------------------------------------------------------------------------------------------
# the merge
# ------------------------------------------------------------------------------------------
K = {("ns", "a", "main"): ["GPU-a"], ("ns", "a", "side"): ["GPU-s"], ("ns", "b", "main"): ["GPU-b"]}


@pytest.mark.parametrize(
    ("answer", "keep", "want"),
    [
        # the answer names a: a gets exactly what it names now (its dropped container goes); b is followed
        (
            {("ns", "a", "main"): ["GPU-a2"]},
            {("ns", "a"), ("ns", "b")},
            {("ns", "a", "main"): ["GPU-a2"], ("ns", "b", "main"): ["GPU-b"]},
        ),
        # the kubelet forgot b, the collector still follows it: b keeps its ids
        ({}, {("ns", "b")}, {("ns", "b", "main"): ["GPU-b"]}),
        # forgotten by both: gone
        ({("ns", "c", "main"): ["GPU-c"]}, set(), {("ns", "c", "main"): ["GPU-c"]}),
        # a pod of the same name in another namespace is another pod
        (
            {("other", "a", "main"): ["GPU-x"]},
            {("ns", "a")},
            {("ns", "a", "main"): ["GPU-a"], ("ns", "a", "side"): ["GPU-s"], ("other", "a", "main"): ["GPU-x"]},
        ),
    ],
)
def test_merge_pod_resources(
    answer: dict[tuple[str, str, str], list[str]],
    keep: set[tuple[str, str]],
    want: dict[tuple[str, str, str], list[str]],
) -> None:
    before = copy.deepcopy(K)
    assert merge_pod_resources(K, answer, keep) == want
    assert before == K  # pure: the known map is not changed


# ------------------------------------------------------------------------------------------
# the live socket
# ------------------------------------------------------------------------------------------
def test_device_ids_from_the_socket_reach_running_and_ended_events(sockets: Path) -> None:
    sock = sockets / "kubelet.sock"
    kubelet = FakeKubelet(
        {
            (NS, "train-a"): {"main": [(GPU, A_IDS), NIC]},
            (NS, "infer-m"): {"main": [("nvidia.com/mig-1g.10gb", MIG_IDS)]},
            ("kube-system", "dns"): {"dns": []},
        },
        # the next poll: train-a has finished and the kubelet has forgotten it; train-c is not admitted yet
        {(NS, "infer-m"): {"main": [("nvidia.com/mig-1g.10gb", MIG_IDS)]}},
        # asked again when train-c arrives placed and unnamed
        {(NS, "infer-m"): {"main": [("nvidia.com/mig-1g.10gb", MIG_IDS)]}, (NS, "train-c"): {"main": [(GPU, C_IDS)]}},
    )
    server, api = fake_api(
        [
            ("list", pod_list("100", A_RUNNING, MIG_RUNNING)),
            ("watch", [{"type": "ADDED", "object": C_RUNNING}, {"type": "MODIFIED", "object": A_DONE}]),
        ]
    )
    collector = watcher(api, sock)
    try:
        with serving(kubelet, sock):
            first, second = collector.poll(), collector.poll()
    finally:
        collector.close()
        server.close()
    assert running_ids(first.result.events) == {f"{NS}/train-a": A_IDS, f"{NS}/infer-m": MIG_IDS}
    assert running_ids(second.result.events) == {f"{NS}/train-c": C_IDS}
    assert ended_ids(second.result.events) == {f"{NS}/train-a": A_IDS}  # kept after the kubelet forgot it
    assert kubelet.calls == 3  # one read per poll, one for the pod that arrived unnamed
    assert not first.result.dead_letters and not second.result.dead_letters
    assert all(r.get("fieldSelector") == ["spec.nodeName=gpu001"] for r in server.requests)


def test_a_missing_socket_is_one_line_and_the_follow_loop_recovers_when_it_appears(sockets: Path) -> None:
    sock = sockets / "kubelet.sock"
    kubelet = FakeKubelet({(NS, "train-a"): {"main": [(GPU, A_IDS)]}})
    server, api = fake_api([("list", pod_list("100", A_RUNNING))])
    collector = watcher(api, sock)
    failures: list[str] = []
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    result = ParseResult()

    def on_failure(exc: SourceUnavailable) -> None:
        failures.append(str(exc))
        if len(failures) == 1:  # a socket file nobody serves: the kubelet died and left it behind
            stale.bind(str(sock))
        elif len(failures) == 2:
            stale.close()
            sock.unlink()
            starting.append(serving(kubelet, sock))
            starting[-1].__enter__()

    starting: list[Any] = []
    try:
        stats = run(
            collector,
            collect_into(result),
            follow=True,
            interval_s=0.01,
            max_failures=5,
            on_failure=on_failure,
            max_polls=1,
        )
    finally:
        for ctx in starting:
            ctx.__exit__(None, None, None)
        stale.close()
        collector.close()
        server.close()
    assert len(failures) == 2 and stats.failed_polls == 2 and stats.polls == 1
    assert all("\n" not in f and str(sock) in f for f in failures)
    assert "No such file or directory" in failures[0]
    assert "List failed: UNAVAILABLE" in failures[1]
    assert running_ids(result.events) == {f"{NS}/train-a": A_IDS}
    assert len(server.requests) == 1  # the failed polls asked the API for nothing


def test_a_refused_read_mid_watch_resumes_at_the_event_that_needed_it(sockets: Path) -> None:
    sock = sockets / "kubelet.sock"
    kubelet = FakeKubelet(
        {(NS, "train-a"): {"main": [(GPU, A_IDS)]}},
        {(NS, "train-a"): {"main": [(GPU, A_IDS)]}, (NS, "train-b"): {"main": [(GPU, B_IDS)]}},
        grpc.StatusCode.RESOURCE_EXHAUSTED,  # the kubelet's rate limit, when train-c needs its ids
        {
            (NS, "train-a"): {"main": [(GPU, A_IDS)]},
            (NS, "train-b"): {"main": [(GPU, B_IDS)]},
            (NS, "train-c"): {"main": [(GPU, C_IDS)]},
        },
    )
    server, api = fake_api(
        [
            ("list", pod_list("100", A_RUNNING)),
            ("watch", [{"type": "ADDED", "object": B_RUNNING}, {"type": "ADDED", "object": C_RUNNING}]),
            ("watch", [{"type": "ADDED", "object": C_RUNNING}]),
        ]
    )
    collector = watcher(api, sock)
    try:
        with serving(kubelet, sock):
            batches = [collector.poll() for _ in range(3)]
    finally:
        collector.close()
        server.close()
    assert running_ids(batches[1].result.events) == {f"{NS}/train-b": B_IDS}  # kept: it came before
    assert "RESOURCE_EXHAUSTED" in batches[1].warnings[0] and "\n" not in batches[1].warnings[0]
    assert running_ids(batches[2].result.events) == {f"{NS}/train-c": C_IDS}  # not published without them
    watches = [r for r in server.requests if "watch" in r]
    assert [r["resourceVersion"] for r in watches] == [["100"], ["120"]]  # resumed at train-c's event


def test_a_restarted_collector_keeps_the_ids_of_a_pod_the_kubelet_forgot(sockets: Path, tmp_path: Path) -> None:
    sock = sockets / "kubelet.sock"
    state = tmp_path / "kubernetes-gpu001-c1.json"
    kubelet = FakeKubelet({(NS, "train-a"): {"main": [(GPU, A_IDS)]}}, {})
    server, api = fake_api([("list", pod_list("100", A_RUNNING)), ("list", pod_list("200", A_DONE))])
    try:
        with serving(kubelet, sock):
            before = watcher(api, sock, state_file=state)
            first = before.poll()
            assert first.commit is not None
            first.commit()
            before.close()
            after = watcher(api, sock, state_file=state)  # the kubelet now names nothing
            batch = after.poll()
            after.close()
    finally:
        server.close()
    assert ended_ids(batch.result.events) == {f"{NS}/train-a": A_IDS}
