"""The Kubernetes collector against a real kube-apiserver and etcd on this machine
(infra/kubernetes/start.sh), with only the chart's RBAC, into the real Kafka broker.

The API server, etcd, list/watch, resourceVersions, bookmarks, continue tokens and 410 Gone are the
real thing; what no process here does (schedule, run containers) the tests do through the API as
the scheduler and the kubelet would (tests/integration/kube_control_plane.py). What the collector
publishes is compared with the pods as the API server returns them.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from infra.kafka.broker import ensure_topics
from pipelines import events as ev
from pipelines.collectors.kubernetes import PodWatcher, core_api
from pipelines.settings import Settings
from tests.integration.kube_control_plane import ControlPlane, now_s, rfc3339
from tests.integration.pipeline import Pipeline, allocations

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
CLUSTER = "k8s-it"
PORTS = {"KUBE_ETCD_PORT": "12379", "KUBE_ETCD_PEER_PORT": "12380", "KUBE_PORT": "16443", "KUBE_DIRECT_PORT": "16444"}


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    state = tmp_path_factory.mktemp("kubernetes")
    env = {**os.environ, "KUBE_DIR": str(state), **PORTS}
    started = subprocess.run(
        ["bash", str(REPO / "infra/kubernetes/start.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    control = None
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        print(started.stdout)
        control = ControlPlane(state)
        yield control
    finally:
        if control is not None:
            control.close()
        subprocess.run(["bash", str(REPO / "infra/kubernetes/stop.sh")], env=env, timeout=120, check=False)


@pytest.fixture(scope="module")
def collector_kubeconfigs(plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Kubeconfigs of the chart's collector ServiceAccount: for the API server with the watch cache
    ("cached") and for the one reading etcd directly ("direct")."""
    home = tmp_path_factory.mktemp("helm")
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(home / "c"),
        "HELM_CONFIG_HOME": str(home / "f"),
        "HELM_DATA_HOME": str(home / "d"),
    }
    namespace, account = plane.chart_service_account(env)
    return {
        name: plane.token_kubeconfig(namespace, account, home / f"{name}.kubeconfig", port=int(PORTS[port]))
        for name, port in (("cached", "KUBE_PORT"), ("direct", "KUBE_DIRECT_PORT"))
    }


def wait(what: str, predicate: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def consume(settings: Settings) -> list[ev.Envelope]:
    return allocations(settings, quiet_ms=1500)


def cli(settings: Settings, kubeconfig: Path, *args: str) -> list[str]:
    return [
        str(REPO / ".venv/bin/gpuledger"),
        "collect",
        "kubernetes",
        "--kubeconfig",
        str(kubeconfig),
        "--cluster",
        CLUSTER,
        *args,
    ]


def run_once(settings: Settings, kubeconfig: Path, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        cli(settings, kubeconfig, "--once", "--format", "json", *args),
        env={**os.environ, **settings.process_env()},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary: dict[str, Any] = json.loads(done.stdout[done.stdout.index("{") :])
    return summary


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def by_job(events: list[ev.Envelope], job_id: str, kind: str) -> list[Any]:
    unique = {e.id: e for e in events}.values()
    return sorted(
        (e.data for e in unique if e.type == kind and getattr(e.data, "job_id", None) == job_id),
        key=lambda d: d.attempt,
    )


def test_the_chart_rbac_reads_pods_and_nodes_and_nothing_else(
    plane: ControlPlane, collector_kubeconfigs: dict[str, Path]
) -> None:
    api = core_api(kubeconfig=str(collector_kubeconfigs["cached"]))
    try:
        api.list_pod_for_all_namespaces(limit=1)
        api.list_node(limit=1)
        for forbidden in (
            lambda: api.list_secret_for_all_namespaces(limit=1),
            lambda: api.create_namespaced_pod(
                "default", {"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
            ),
        ):
            with pytest.raises(ApiException) as denied:
                forbidden()
            assert denied.value.status == 403
    finally:
        api.api_client.close()


def test_follow_sees_every_transition_and_a_pod_deleted_while_it_was_down(
    plane: ControlPlane, collector_kubeconfigs: dict[str, Path], isolated_settings: Settings, tmp_path: Path
) -> None:
    ns, node = "llm-follow", "gpu-follow-1"
    plane.namespace(ns)
    plane.node(node)
    ensure_topics(isolated_settings)
    state_file = tmp_path / "collector.state"
    env = {**os.environ, **isolated_settings.process_env()}
    command = cli(
        isolated_settings,
        collector_kubeconfigs["cached"],
        "--follow",
        "--interval",
        "2",
        "--namespace",
        ns,
        "--no-nodes",
        "--state-file",
        str(state_file),
    )
    log = (tmp_path / "collector.log").open("w")
    collector = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        # pending -> running -> OOMKilled
        plane.pod(ns, "oom", gpus=2, devices=["GPU-aaaa-0000", "GPU-aaaa-0001"])
        plane.bind(ns, "oom", node)
        t0 = now_s() - timedelta(seconds=30)
        plane.status(ns, "oom", "Running", started=t0)
        oom_end = t0 + timedelta(seconds=20)
        plane.status(
            ns,
            "oom",
            "Failed",
            started=t0,
            terminated={
                "exitCode": 137,
                "reason": "OOMKilled",
                "startedAt": rfc3339(t0),
                "finishedAt": rfc3339(oom_end),
            },
        )
        # running -> a restart -> Completed (restartPolicy OnFailure)
        plane.pod(ns, "retry", gpus=1, devices=["GPU-bbbb-0000"], restart_policy="OnFailure")
        plane.bind(ns, "retry", node)
        plane.status(ns, "retry", "Running", started=t0)
        crashed, again = t0 + timedelta(seconds=5), t0 + timedelta(seconds=7)
        first_run = {"exitCode": 1, "reason": "Error", "startedAt": rfc3339(t0), "finishedAt": rfc3339(crashed)}
        plane.status(ns, "retry", "Running", started=t0, restarts=1, running_since=again, last=first_run)
        done_at = t0 + timedelta(seconds=25)
        retry_final = plane.status(
            ns,
            "retry",
            "Succeeded",
            started=t0,
            restarts=1,
            last=first_run,
            terminated={
                "exitCode": 0,
                "reason": "Completed",
                "startedAt": rfc3339(again),
                "finishedAt": rfc3339(done_at),
            },
        )
        # running, then deleted while the collector is down
        plane.pod(ns, "doomed", gpus=4, devices=[f"GPU-cccc-000{i}" for i in range(4)])
        plane.bind(ns, "doomed", node)
        plane.status(ns, "doomed", "Running", started=t0)

        def seen(kind: str, job: str) -> Callable[[], bool]:
            return lambda: bool(by_job(consume(isolated_settings), f"{ns}/{job}", kind))

        wait("the OOM kill", seen("allocation.ended", "oom"))
        wait("the completion", seen("allocation.ended", "retry"))
        wait("the doomed pod running", seen("allocation.running", "doomed"))
        wait("the collector to save its state", lambda: state_file.exists())
        time.sleep(2.5)  # one more watch poll saves the state with a later confirmation
        last_seen = datetime.fromisoformat(json.loads(state_file.read_text())["confirmed_at"])
        collector.send_signal(signal.SIGTERM)
        assert collector.wait(timeout=60) == 0, (tmp_path / "collector.log").read_text()
        before = consume(isolated_settings)

        plane.delete(ns, "doomed")
        deleted_at = datetime.now(UTC)
        collector = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        wait("the deletion reconciled", seen("allocation.ended", "doomed"))
    finally:
        collector.send_signal(signal.SIGTERM)
        collector.wait(timeout=60)
        log.close()

    events = consume(isolated_settings)
    assert not any(e.type.startswith("deadletter") for e in events)
    # each event once, across the restart too: the restarted collector's first list publishes only
    # the end of the pod deleted while it was down
    ids = [e.id for e in events]
    assert len(ids) == len(set(ids)), "an event was published twice"
    published = {e.id for e in before}
    assert [(e.type, e.data.job_id) for e in events if e.id not in published] == [("allocation.ended", f"{ns}/doomed")]

    (pending,) = by_job(events, f"{ns}/oom", "allocation.pending")
    created = parse_time(plane.read(ns, "oom")["metadata"]["creationTimestamp"])
    assert pending.submit_time == created and pending.node is None
    (running,) = by_job(events, f"{ns}/oom", "allocation.running")
    assert running.node == node and running.start_time == t0
    assert running.device_ids == ["GPU-aaaa-0000", "GPU-aaaa-0001"] and running.gpus[0].count == 2
    (oom,) = by_job(events, f"{ns}/oom", "allocation.ended")
    assert (oom.outcome, oom.failure_reason, oom.exit_code) == ("failure", "oom", 137)
    assert (oom.start_time, oom.end_time) == (t0, oom_end)

    # the restart splits the pod into two attempts that tile its time, as the API's status says
    status = retry_final["status"]["containerStatuses"][0]
    assert status["restartCount"] == 1
    attempts = by_job(events, f"{ns}/retry", "allocation.ended")
    assert [a.attempt for a in attempts] == [1, 2]
    assert (attempts[0].start_time, attempts[0].end_time, attempts[0].outcome, attempts[0].exit_code) == (
        t0,
        parse_time(status["lastState"]["terminated"]["finishedAt"]),
        "failure",
        1,
    )
    assert (attempts[1].start_time, attempts[1].end_time, attempts[1].outcome, attempts[1].exit_code) == (
        crashed,
        parse_time(status["state"]["terminated"]["finishedAt"]),
        "success",
        0,
    )

    # deleted while nobody watched: ended when it was last known to exist
    (gone,) = by_job(events, f"{ns}/doomed", "allocation.ended")
    assert (gone.outcome, gone.failure_reason) == ("failure", "cancelled")
    assert last_seen <= gone.end_time <= deleted_at and gone.start_time == t0


def test_a_watch_from_a_compacted_revision_gets_410_and_the_relist_loses_and_repeats_nothing(
    plane: ControlPlane, collector_kubeconfigs: dict[str, Path]
) -> None:
    """Against the API server without a watch cache, a watch reads etcd itself: compact etcd past
    the collector's resourceVersion and its next watch ends in 410 Gone; the re-list then brings what
    happened meanwhile (a new pod, an end, a deletion) once, and nothing it had already seen."""
    ns, node = "llm-gone", "gpu-gone-1"
    plane.namespace(ns)
    plane.node(node)
    t0 = now_s() - timedelta(seconds=60)
    for name in ("stays", "ends", "vanishes"):
        plane.pod(ns, name, gpus=1, devices=[f"GPU-{name}"])
        plane.bind(ns, name, node)
        plane.status(ns, name, "Running", started=t0)
    watcher = PodWatcher(
        core_api(kubeconfig=str(collector_kubeconfigs["direct"])), cluster=CLUSTER, namespace=ns, watch_timeout_s=1
    )
    try:
        first = watcher.poll()
        listed_at = int(watcher.resource_version or 0)
        assert sorted(e.type for e in first.result.events) == ["allocation.pending"] * 3 + ["allocation.running"] * 3
        # while the collector is between polls: a pod starts, one ends, one is deleted; etcd compacts
        plane.pod(ns, "arrives", gpus=1, devices=["GPU-arrives"])
        plane.bind(ns, "arrives", node)
        plane.status(ns, "arrives", "Running", started=t0 + timedelta(seconds=10))
        end = t0 + timedelta(seconds=40)
        plane.status(
            ns,
            "ends",
            "Succeeded",
            started=t0,
            terminated={"exitCode": 0, "reason": "Completed", "startedAt": rfc3339(t0), "finishedAt": rfc3339(end)},
        )
        plane.delete(ns, "vanishes")
        assert plane.compact_etcd(int(PORTS["KUBE_ETCD_PORT"])) > listed_at

        expired = watcher.poll()
        assert "expired" in (expired.note or "") and not expired.result.events and watcher.resource_version is None
        relisted = watcher.poll()
        assert int(watcher.resource_version or 0) > listed_at
    finally:
        watcher.close()
    events = first.result.events + expired.result.events + relisted.result.events
    assert not relisted.result.dead_letters
    ids = [e.id for e in events]
    assert len(ids) == len(set(ids))
    after = {(e.type, e.data.job_id.split("/")[1]) for e in relisted.result.events}
    assert after == {
        ("allocation.pending", "arrives"),
        ("allocation.running", "arrives"),
        ("allocation.ended", "ends"),
        ("allocation.ended", "vanishes"),
    }
    ended = {e.data.job_id.split("/")[1]: e.data for e in relisted.result.events if e.type == "allocation.ended"}
    assert (ended["ends"].end_time, ended["ends"].outcome) == (end, "success")
    assert ended["vanishes"].failure_reason == "cancelled"


def test_bookmarks_move_a_quiet_watch_forward(plane: ControlPlane, collector_kubeconfigs: dict[str, Path]) -> None:
    """The API server's watch cache sends a BOOKMARK shortly before a watch times out, carrying the
    progress made since the watch began: a pod created in another namespace while the quiet
    namespace's watch is open moves that watch's resourceVersion past it, with no event to publish."""
    quiet, busy = "llm-quiet", "llm-busy"
    plane.namespace(quiet)
    plane.namespace(busy)
    watcher = PodWatcher(
        core_api(kubeconfig=str(collector_kubeconfigs["cached"])), cluster=CLUSTER, namespace=quiet, watch_timeout_s=5
    )
    created: list[dict[str, Any]] = []
    elsewhere = threading.Timer(
        1.0, lambda: created.append(plane.pod(busy, "elsewhere", gpus=1, devices=["GPU-elsewhere"]))
    )
    try:
        watcher.poll()
        listed_at = int(watcher.resource_version or 0)
        elsewhere.start()  # while the watch below is open
        watched = watcher.poll()
    finally:
        elsewhere.join()
        watcher.close()
    assert created, "the pod in the other namespace was not created"
    assert not watched.result.events and not watched.result.dead_letters
    assert watched.note and not watched.note.endswith(": 0 events")  # bookmarks, and nothing else
    assert int(watcher.resource_version or 0) >= int(created[0]["metadata"]["resourceVersion"]) > listed_at


def test_the_list_follows_continue_tokens_over_pages(
    plane: ControlPlane, collector_kubeconfigs: dict[str, Path], isolated_settings: Settings
) -> None:
    ns, node = "llm-pages", "gpu-pages-1"
    plane.namespace(ns)
    plane.node(node)
    t0 = now_s() - timedelta(seconds=60)
    names = [f"worker-{i}" for i in range(5)]
    for name in names:
        plane.pod(ns, name, gpus=1, devices=[f"GPU-{name}"])
        plane.bind(ns, name, node)
        plane.status(ns, name, "Running", started=t0)
    ensure_topics(isolated_settings)
    summary = run_once(
        isolated_settings, collector_kubeconfigs["cached"], "--namespace", ns, "--no-nodes", "--page-size", "2"
    )
    assert summary["dead_letters"] == 0
    running = {e.data.job_id for e in consume(isolated_settings) if e.type == "allocation.running"}
    assert running == {f"{ns}/{name}" for name in names}  # three pages of two, two and one


def test_not_ready_and_cordoned_nodes_are_unavailable_capacity(
    plane: ControlPlane, collector_kubeconfigs: dict[str, Path], isolated_settings: Settings, tmp_path: Path
) -> None:
    """NotReady for a few seconds, then cordoned for a few seconds, then back: the collector says
    down, drained, up; the stream workers count all 8 GPUs unavailable from the first to the last."""
    node = "gpu-flaky-1"
    plane.node(node)
    ensure_topics(isolated_settings)
    state_file = tmp_path / "collector.state"
    kubeconfig = collector_kubeconfigs["cached"]
    pipeline = Pipeline(isolated_settings, tmp_path)
    try:
        run_once(isolated_settings, kubeconfig, "--namespace", "llm-none", "--state-file", str(state_file))
        plane.node_ready(node, False)
        run_once(isolated_settings, kubeconfig, "--namespace", "llm-none", "--state-file", str(state_file))
        time.sleep(2)
        plane.node_ready(node, True)
        plane.cordon(node, True)
        run_once(isolated_settings, kubeconfig, "--namespace", "llm-none", "--state-file", str(state_file))
        time.sleep(2)
        plane.cordon(node, False)
        run_once(isolated_settings, kubeconfig, "--namespace", "llm-none", "--state-file", str(state_file))
        states = sorted(
            (e for e in consume(isolated_settings) if e.type == "node.state" and e.data.node == node),
            key=lambda e: e.time,
        )
        assert [e.data.state for e in states] == ["up", "down", "drained", "up"]
        assert all(e.data.gpus == 8 for e in states)
        down, back = states[1], states[3]
        pipeline.start_worker(0)
        pipeline.wait(timeout_s=300)
        start, stop = down.time.replace(minute=0, second=0, microsecond=0), back.time + timedelta(hours=1)
        expected = 8 * (back.time - down.time).total_seconds()
        unavailable = functools.partial(pipeline.unavailable_gpu_seconds, start, stop)
        wait("the unavailable windows to close", lambda: unavailable() >= expected - 0.01, timeout_s=120)
        assert unavailable() == pytest.approx(expected, abs=0.01)
    finally:
        pipeline.stop_all()
