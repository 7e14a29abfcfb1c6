"""``gpuledger collect kubernetes --node-name … --pod-resources-socket …`` into the real Kafka broker.

The command as the DaemonSet runs it (one poll instead of ``--follow``): the pods come from the
scripted API server of ``tests/unit/test_collectors_kubernetes.py`` through a kubeconfig, the
device ids from a real gRPC server on a unix socket (``tests/unit/fake_kubelet.py``: no kubelet
runs here), and the test reads the published allocation events back from the broker.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from gpuledger.cli import collect_cmd
from infra.kafka.broker import ensure_topics
from pipelines import wire
from pipelines.settings import Settings, reset_settings
from pipelines.topics import SCHEDULER_ALLOCATIONS, physical_name
from tests.integration.test_collectors_kafka import _consume
from tests.unit.fake_kubelet import FakeKubelet, serving, socket_dir
from tests.unit.test_collectors_kubernetes import FakeApiServer, pod, pod_list

pytestmark = pytest.mark.integration

IDS = ["GPU-6f0d7e1a-3b2c-4d5e-8f90-0a1b2c3d4e5f", "GPU-7a1e8f2b-4c3d-5e6f-9a01-1b2c3d4e5f60"]
KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{{name: fake, cluster: {{server: "{url}"}}}}]
users: [{{name: collector, user: {{token: not-checked}}}}]
contexts: [{{name: fake, context: {{cluster: fake, user: collector}}}}]
current-context: fake
"""


@pytest.fixture
def environment(isolated_settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", isolated_settings.bootstrap_servers)
    monkeypatch.setenv("GPULEDGER_TOPIC_PREFIX", isolated_settings.topic_prefix)
    monkeypatch.setenv("GPULEDGER_HOME", str(isolated_settings.home))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    reset_settings()
    try:
        yield isolated_settings
    finally:
        reset_settings()


def test_per_node_collector_publishes_the_kubelets_device_ids(environment: Settings, tmp_path: Path) -> None:
    ensure_topics(environment)
    running = pod("train-a", rv="90", created="2026-03-02T08:00:00Z", started="2026-03-02T08:01:00Z", node="gpu001")
    # every poll lists the DRA ResourceClaims and GPU ResourceSlices first (none here), then the pods
    api = FakeApiServer(
        [
            ("list", {"kind": "ResourceClaimList", "apiVersion": "resource.k8s.io/v1", "items": []}),
            ("list", {"kind": "ResourceSliceList", "apiVersion": "resource.k8s.io/v1", "items": []}),
            ("list", pod_list("100", running)),
        ]
    )
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG.format(url=api.url))
    kubelet = FakeKubelet({("llm-train", "train-a"): {"main": [("nvidia.com/gpu", IDS)]}})
    app = typer.Typer()
    app.callback()(lambda: None)
    collect_cmd.register(app)
    try:
        with socket_dir() as sockets, serving(kubelet, sockets / "kubelet.sock"):
            result = CliRunner().invoke(
                app,
                [
                    "collect",
                    "kubernetes",
                    "--kubeconfig",
                    str(kubeconfig),
                    "--cluster",
                    "itest",
                    "--no-nodes",
                    "--node-name",
                    "gpu001",
                    "--pod-resources-socket",
                    str(sockets / "kubelet.sock"),
                    "--once",
                ],
            )
    finally:
        api.close()
    assert result.exit_code == 0, result.output
    paths = [r["path"][0].rsplit("/", 1)[-1] for r in api.requests]
    assert paths == ["resourceclaims", "resourceslices", "pods"], api.requests
    assert api.requests[2]["fieldSelector"] == ["spec.nodeName=gpu001"] and kubelet.calls == 1
    published = _consume(environment, physical_name(SCHEDULER_ALLOCATIONS, environment), expected=2)
    decoded = [wire.decode(m.value) for m in published]  # type: ignore[attr-defined]
    placed = [e for e in decoded if e.type == "allocation.running"]
    assert [(e.data.job_id, e.data.node, list(e.data.device_ids)) for e in placed] == [
        ("llm-train/train-a", "gpu001", IDS)
    ]
