"""Node labels -> node.state: GPU feature discovery's replicas and sharing strategy (docs/ATTRIBUTION.md
"Time-slicing and MPS"), from a NodeList file (with ``--time``) and from the collector's node path."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from pipelines.collectors.base import Batch
from pipelines.collectors.kubernetes_nodes import NodeStates
from pipelines.events import NodeStateEvent
from pipelines.parsers import kubernetes

T = "2026-12-04T10:00:00Z"


def gpu_node(name: str, labels: dict[str, str], advertised: str = "8") -> dict[str, Any]:
    """A Node as ``kubectl get nodes -o json`` prints it."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": {
            "capacity": {"nvidia.com/gpu": advertised},
            "allocatable": {"nvidia.com/gpu": advertised},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "lastTransitionTime": "2026-12-01T00:00:00Z",
                }
            ],
        },
    }


def kubectl_list(*items: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": list(items)}


@pytest.mark.parametrize(
    ("labels", "advertised", "expected"),
    [
        (
            {
                "nvidia.com/gpu.replicas": "10",
                "nvidia.com/gpu.sharing-strategy": "time-slicing",
                "nvidia.com/gpu.count": "2",
            },
            "20",
            (2, 10, "time-slicing"),
        ),
        (
            {"nvidia.com/gpu.replicas": "2", "nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/gpu.count": "4"},
            "8",
            (4, 2, "mps"),
        ),
        ({"nvidia.com/gpu.replicas": "4"}, "32", (8, 4, "time-slicing")),  # before the strategy label existed
        ({"nvidia.com/gpu.replicas": "1", "nvidia.com/gpu.sharing-strategy": "none"}, "8", (8, 1, "none")),
        ({"nvidia.com/gpu.sharing-strategy": "none"}, "8", (8, 1, "none")),
        ({}, "8", (8, None, None)),  # nothing stated
    ],
)
def test_feature_discovery_labels_give_replicas_and_sharing(
    labels: dict[str, str], advertised: str, expected: tuple[int, int | None, str | None]
) -> None:
    result = kubernetes.parse(orjson.dumps(kubectl_list(gpu_node("gpu-a", labels, advertised))), cluster="c1", time=T)
    (event,) = result.events
    assert isinstance(event, NodeStateEvent)
    assert (event.data.gpus, event.data.gpu_replicas, event.data.sharing) == expected


def test_kubectl_get_nodes_file_with_time_gives_node_states(tmp_path: Path) -> None:
    """``gpuledger ingest kubernetes --file F --time T`` on ``kubectl get nodes -o json``: one state per node,
    dated T (the node path reads the ``time`` hint)."""
    doc = kubectl_list(
        gpu_node("gpu-a", {"nvidia.com/gpu.replicas": "10", "nvidia.com/gpu.count": "2"}, "20"), gpu_node("gpu-b", {})
    )
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps(doc, indent=4))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuledger.cli.main",
            "ingest",
            "kubernetes",
            "--file",
            str(path),
            "--time",
            T,
            "--dry-run",
            "--format",
            "json",
            "--cluster",
            "c1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["events"] == 2 and summary["by_type"] == {"node.state": 2}, summary
    result = kubernetes.parse(path.read_bytes(), cluster="c1", time=T)
    assert {e.data.node: (e.time, e.data.gpu_replicas) for e in result.events} == {
        "gpu-a": (datetime(2026, 12, 4, 10, tzinfo=UTC), 10),
        "gpu-b": (datetime(2026, 12, 4, 10, tzinfo=UTC), None),
    }


class _Response:
    def __init__(self, doc: dict[str, Any]) -> None:
        self.data = orjson.dumps(doc)


class _Api:
    def __init__(self, *docs: dict[str, Any]) -> None:
        self.docs = list(docs)

    def list_node(self, **_: Any) -> _Response:
        return _Response(self.docs.pop(0))


def test_the_collector_passes_on_a_change_of_sharing() -> None:
    """The live node path stamps the poll time and passes on a relabelled node (replicas 4 -> 10)."""

    def api_node(replicas: str) -> dict[str, Any]:
        item = gpu_node("gpu-a", {"nvidia.com/gpu.replicas": replicas, "nvidia.com/gpu.count": "2"}, "8")
        del item["kind"], item["apiVersion"]  # the API's NodeList items carry no kind
        return item

    nodes = NodeStates("c1")
    api = _Api(*({"kind": "NodeList", "items": [api_node(r)]} for r in ("4", "4", "10")))
    got = []
    for minute in range(3):
        batch = Batch()
        nodes.poll(api, datetime(2026, 12, 4, 10, minute, tzinfo=UTC), batch)
        got.append([(e.data.gpu_replicas, e.data.sharing) for e in batch.result.events])
    assert got == [[(4, "time-slicing")], [], [(10, "time-slicing")]]
