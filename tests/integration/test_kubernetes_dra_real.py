"""GPUs held through DRA ResourceClaims, against a real kube-apiserver (resource.k8s.io/v1) and etcd
(infra/kubernetes/start.sh), collected by `gpuledger collect kubernetes` into the real Kafka broker.

What the driver, the scheduler, the resourceclaim controller and the kubelet would do, the test
does through the API as they would (tests/integration/kube_control_plane.py): a DeviceClass, the
driver's ResourceSlice for the node (gpu-0, gpu-1 with their uuids), a claim made from a template
for pod A's whole GPU, a claim reserved for pods B and C sharing one GPU, the claims' allocation
and reservations through their status subresource, the pods bound and Running. What the collector
publishes is compared with the claims as the API server returns them.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from infra.kafka.broker import ensure_topics
from pipelines.collectors.kubernetes import PodWatcher, core_api
from pipelines.settings import Settings
from tests.integration.kube_control_plane import ControlPlane, now_s, rfc3339
from tests.integration.pipeline import allocations

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
CLUSTER = "k8s-dra-it"
DRIVER = "gpu.nvidia.com"
# ports of their own: test_kubernetes_real.py may run its control plane at the same time
PORTS = {"KUBE_ETCD_PORT": "22379", "KUBE_ETCD_PEER_PORT": "22380", "KUBE_PORT": "26443", "KUBE_DIRECT_PORT": "26444"}


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    state = tmp_path_factory.mktemp("kubernetes-dra")
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
        control = ControlPlane(state)
        yield control
    finally:
        if control is not None:
            control.close()
        subprocess.run(["bash", str(REPO / "infra/kubernetes/stop.sh")], env=env, timeout=120, check=False)


def collect_once(settings: Settings, kubeconfig: Path, namespace: str) -> dict[str, Any]:
    done = subprocess.run(
        [
            str(REPO / ".venv/bin/gpuledger"),
            "collect",
            "kubernetes",
            "--kubeconfig",
            str(kubeconfig),
            "--cluster",
            CLUSTER,
            "--namespace",
            namespace,
            "--no-nodes",
            "--once",
            "--format",
            "json",
        ],
        env={**os.environ, **settings.process_env()},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary: dict[str, Any] = json.loads(done.stdout[done.stdout.index("{") :])
    return summary


def scenario(plane: ControlPlane, ns: str, node: str, uuids: dict[str, str]) -> datetime:
    """Pod A holds gpu-0 through a claim made from its template; B and C share gpu-1 through one claim."""
    plane.namespace(ns)
    plane.node(node, gpus=0)
    plane.resource_slice(node, DRIVER, uuids)
    plane.claim(ns, "a-gpu-x7k2p", DRIVER)  # as the resourceclaim controller names a template's claim
    plane.claim(ns, "shared", DRIVER)
    pods = {"a": plane.claim_pod(ns, "a", {"gpu": {"resourceClaimTemplateName": "one-gpu"}})}
    pods |= {name: plane.claim_pod(ns, name, {"gpu": {"resourceClaimName": "shared"}}) for name in ("b", "c")}
    plane.allocate(ns, "a-gpu-x7k2p", driver=DRIVER, pool=node, device="gpu-0", pods=[pods["a"]])
    plane.allocate(ns, "shared", driver=DRIVER, pool=node, device="gpu-1", pods=[pods["b"], pods["c"]])
    t0 = now_s() - timedelta(seconds=60)
    for name in pods:
        plane.bind(ns, name, node)
        plane.status(ns, name, "Running", started=t0, claims={"gpu": "a-gpu-x7k2p"} if name == "a" else None)
    return t0


def expected(plane: ControlPlane, ns: str, uuids: dict[str, str]) -> dict[str, tuple[list[str], list[str]]]:
    """Per pod, the devices and claims the API server says it holds: the claims its spec and status
    name, their allocated devices mapped to uuids by the ResourceSlice."""
    out = {}
    for name in ("a", "b", "c"):
        pod = plane.read(ns, name)
        made = {s["name"]: s["resourceClaimName"] for s in pod["status"].get("resourceClaimStatuses", [])}
        claims = [ref.get("resourceClaimName") or made[ref["name"]] for ref in pod["spec"]["resourceClaims"]]
        devices = [
            uuids[r["device"]]
            for c in claims
            for r in plane.read_claim(ns, c)["status"]["allocation"]["devices"]["results"]
        ]
        out[name] = (devices, [f"{ns}/{c}" for c in claims])
    return out


def test_collect_publishes_the_devices_of_the_claims_each_pod_holds(
    plane: ControlPlane, isolated_settings: Settings
) -> None:
    ns, node = "llm-dra", "gpu-dra-1"
    uuids = {"gpu-0": "GPU-4b2c7e1a-0000-4000-8000-00000000000a", "gpu-1": "GPU-4b2c7e1a-0000-4000-8000-00000000000b"}
    plane.device_class(DRIVER, DRIVER)
    t0 = scenario(plane, ns, node, uuids)
    truth = expected(plane, ns, uuids)
    assert truth == {
        "a": ([uuids["gpu-0"]], [f"{ns}/a-gpu-x7k2p"]),
        "b": ([uuids["gpu-1"]], [f"{ns}/shared"]),
        "c": ([uuids["gpu-1"]], [f"{ns}/shared"]),
    }

    ensure_topics(isolated_settings)
    summary = collect_once(isolated_settings, plane.dir / "admin.kubeconfig", ns)
    assert (summary["dead_letters"], summary["warnings"]) == (0, [])
    running = {
        e.data.job_id.split("/")[1]: e.data
        for e in {e.id: e for e in allocations(isolated_settings, quiet_ms=1500)}.values()
        if e.type == "allocation.running"
    }
    assert {name: (d.device_ids, d.claims) for name, d in running.items()} == truth
    for data in running.values():
        assert (data.node, data.start_time, [(g.kind, g.count) for g in data.gpus]) == (node, t0, [("gpu", 1)])


def test_a_pod_whose_claim_is_deleted_before_its_end_still_ends_on_its_gpu(plane: ControlPlane) -> None:
    """The resourceclaim controller deletes a template's claim when its pod is done: the collector
    that saw the pod running still names the GPU in its end."""
    ns, node = "llm-dra-end", "gpu-dra-2"
    uuids = {"gpu-0": "GPU-7d1e0c55-0000-4000-8000-00000000000a", "gpu-1": "GPU-7d1e0c55-0000-4000-8000-00000000000b"}
    t0 = scenario(plane, ns, node, uuids)
    watcher = PodWatcher(
        core_api(kubeconfig=str(plane.dir / "admin.kubeconfig")),
        cluster=CLUSTER,
        namespace=ns,
        watch_timeout_s=2,
        dra=True,
    )
    try:
        first = watcher.poll()
        assert not first.result.dead_letters and not first.warnings
        end = t0 + timedelta(seconds=30)
        plane.status(
            ns,
            "a",
            "Succeeded",
            started=t0,
            claims={"gpu": "a-gpu-x7k2p"},
            terminated={"exitCode": 0, "reason": "Completed", "startedAt": rfc3339(t0), "finishedAt": rfc3339(end)},
        )
        plane.delete_claim(ns, "a-gpu-x7k2p")
        watched = watcher.poll()
    finally:
        watcher.close()
    assert not watched.result.dead_letters
    (ended,) = [e.data for e in watched.result.events if e.type == "allocation.ended"]
    assert (ended.job_id, ended.device_ids, ended.claims, ended.end_time, ended.outcome) == (
        f"{ns}/a",
        [uuids["gpu-0"]],
        [f"{ns}/a-gpu-x7k2p"],
        end.astimezone(UTC),
        "success",
    )
