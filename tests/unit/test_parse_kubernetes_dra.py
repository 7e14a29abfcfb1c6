"""Pods holding GPUs through DRA ResourceClaims: claims, slices and pods in one input or several."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipelines.events import AllocationEvent
from pipelines.parsers import kubernetes
from pipelines.parsers.base import ParseResult
from tests.unit.test_parsers_fuzz_sched import FUZZ, _mutate, check

REALWORLD = Path("/work/shared/realworld/k8s_pods_list_minikube_kuard.json")
NODE = "gpu-node-1"
T0 = "2026-03-02T08:00:00Z"
T1 = "2026-03-02T08:01:00Z"


def gpu(name: str, uuid: str) -> dict[str, Any]:
    return {
        "name": name,
        "attributes": {
            "type": {"string": "gpu"},
            "uuid": {"string": uuid},
            "productName": {"string": "NVIDIA H100 80GB HBM3"},
        },
    }


def mig(name: str, uuid: str, parent: str, gi: int | None = None) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "type": {"string": "mig"},
        "uuid": {"string": uuid},
        "parentUUID": {"string": parent},
        "profile": {"string": "3g.40gb"},
        "productName": {"string": "NVIDIA H100 80GB HBM3"},
    }
    if gi is not None:
        attrs["gpu.nvidia.com/gpuInstanceId"] = {"int": gi}
    return {"name": name, "attributes": attrs}


def resource_slice(*devices: dict[str, Any], driver: str = "gpu.nvidia.com", generation: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{NODE}-{driver}-x1"},
        "spec": {
            "driver": driver,
            "nodeName": NODE,
            "devices": list(devices),
            "pool": {"name": NODE, "generation": generation, "resourceSliceCount": 1},
        },
    }


def claim(
    name: str, devices: list[str] | None, *pods: str, driver: str = "gpu.nvidia.com", namespace: str = "ml"
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": f"claim-{name}"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu.nvidia.com",
                            "allocationMode": "ExactCount",
                            "count": len(devices or [1]),
                        },
                    }
                ]
            }
        },
    }
    if devices is not None:
        body["status"] = {
            "allocation": {
                "devices": {
                    "results": [{"request": "gpu", "driver": driver, "pool": NODE, "device": d} for d in devices]
                }
            },
            "reservedFor": [{"resource": "pods", "name": p, "uid": f"uid-{p}"} for p in pods],
        }
    return body


def pod(
    name: str,
    claims: dict[str, str],
    *,
    running: bool = True,
    generated: dict[str, str] | None = None,
    namespace: str = "ml",
) -> dict[str, Any]:
    """A pod using ``claims`` (pod claim name -> ResourceClaim name, or ``template:<name>``)."""
    refs = [
        {"name": ref, "resourceClaimTemplateName": target.split(":", 1)[1]}
        if target.startswith("template:")
        else {"name": ref, "resourceClaimName": target}
        for ref, target in claims.items()
    ]
    spec: dict[str, Any] = {
        "containers": [
            {"name": "main", "image": "train:1", "resources": {"claims": [{"name": ref} for ref in claims]}}
        ],
        "resourceClaims": refs,
        "restartPolicy": "Never",
    }
    status: dict[str, Any] = {"phase": "Pending"}
    if running:
        spec["nodeName"] = NODE
        status = {
            "phase": "Running",
            "startTime": T1,
            "containerStatuses": [{"name": "main", "restartCount": 0, "state": {"running": {"startedAt": T1}}}],
        }
    if generated:
        status["resourceClaimStatuses"] = [{"name": ref, "resourceClaimName": c} for ref, c in generated.items()]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "spec": spec,
        "status": status,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "creationTimestamp": T0,
            "labels": {"team": "llm"},
        },
    }


def as_list(*items: dict[str, Any]) -> bytes:
    return orjson.dumps({"apiVersion": "v1", "kind": "List", "items": list(items)})


SLICE = resource_slice(gpu("gpu-0", "GPU-a"), gpu("gpu-1", "GPU-b"))
CLAIMS = [claim("whole", ["gpu-0"], "a"), claim("shared", ["gpu-1"], "b", "c")]
PODS = [pod("a", {"gpu": "whole"}), pod("b", {"gpu": "shared"}), pod("c", {"gpu": "shared"})]


def running(result: ParseResult) -> dict[str, Any]:
    assert result.dead_letters == [], [d.reason for d in result.dead_letters]
    events: list[AllocationEvent] = result.events  # type: ignore[assignment]
    return {e.data.job_id.split("/")[1]: e.data for e in events if e.type == "allocation.running"}


def placements(result: ParseResult) -> dict[str, tuple[list[str], list[str], list[tuple[str, int]]]]:
    return {name: (d.device_ids, d.claims, [(g.kind, g.count) for g in d.gpus]) for name, d in running(result).items()}


SCENARIO = {
    "a": (["GPU-a"], ["ml/whole"], [("gpu", 1)]),
    "b": (["GPU-b"], ["ml/shared"], [("gpu", 1)]),
    "c": (["GPU-b"], ["ml/shared"], [("gpu", 1)]),
}


def test_claims_give_their_devices_to_the_pods_holding_them() -> None:
    result = kubernetes.parse(as_list(SLICE, *CLAIMS, *PODS), cluster="c1")
    assert placements(result) == SCENARIO
    data = running(result)["a"]
    assert (data.node, data.start_time, data.requested_gpus) == (NODE, datetime(2026, 3, 2, 8, 1, tzinfo=UTC), 1.0)
    assert data.gpus[0].gpu_type == "NVIDIA H100 80GB HBM3"
    pending = [e for e in result.events if e.type == "allocation.pending"]
    assert len(pending) == 3 and all(e.data.claims for e in pending)


def test_separate_files_are_read_together_in_any_order() -> None:
    files = [
        (as_list(*PODS), "pods.json"),
        (
            orjson.dumps(
                {
                    "kind": "ResourceClaimList",
                    "apiVersion": "resource.k8s.io/v1",
                    "items": [{k: v for k, v in c.items() if k != "kind"} for c in CLAIMS],
                }
            ),
            "claims.json",
        ),
        (as_list(SLICE), "slices.json"),
    ]
    assert placements(kubernetes.parse_files(files, cluster="c1")) == SCENARIO
    assert placements(kubernetes.parse_files(files[::-1], cluster="c1")) == SCENARIO


def test_claims_and_slices_alone_give_no_event_and_say_what_is_needed() -> None:
    result = kubernetes.parse_files([(as_list(*CLAIMS), "claims.json"), (as_list(SLICE), "slices.json")], cluster="c1")
    assert result.events == [] and result.dead_letters == []
    assert len(result.notes) == 1 and "kubectl get pods -A -o json" in result.notes[0]


def test_a_device_in_no_slice_is_a_dead_letter_naming_it() -> None:
    result = kubernetes.parse(as_list(resource_slice(gpu("gpu-0", "GPU-a")), *CLAIMS, *PODS), cluster="c1")
    assert sorted(d.data.job_id for d in result.events if d.type == "allocation.running") == ["ml/a"]
    reasons = {d.reason for d in result.dead_letters}
    assert len(result.dead_letters) == 2 and len(reasons) == 1
    assert "gpu.nvidia.com/gpu-node-1/gpu-1 of ResourceClaim ml/shared is in no ResourceSlice" in reasons.pop()


def test_a_running_pod_whose_claim_is_not_given_is_a_dead_letter() -> None:
    result = kubernetes.parse(as_list(*PODS), cluster="c1")
    assert result.events == []
    assert len(result.dead_letters) == 3
    assert "ResourceClaim ml/whole is not in the input" in result.dead_letters[0].reason


def test_a_claim_made_from_a_template_is_found_through_the_pod_status() -> None:
    made = claim("a-gpu-x7k2p", ["gpu-0"], "a")
    templated = pod("a", {"gpu": "template:one-gpu"}, generated={"gpu": "a-gpu-x7k2p"})
    assert placements(kubernetes.parse(as_list(SLICE, made, templated), cluster="c1")) == {
        "a": (["GPU-a"], ["ml/a-gpu-x7k2p"], [("gpu", 1)])
    }


def test_mig_instances_are_named_by_parent_and_gpu_instance_or_counted_with_a_note() -> None:
    devices = resource_slice(mig("gpu-0-mig-9-4-4", "MIG-1", "GPU-a", gi=2), mig("gpu-0-mig-9-0-4", "MIG-2", "GPU-a"))
    claims = [claim("known", ["gpu-0-mig-9-4-4"], "a"), claim("unknown", ["gpu-0-mig-9-0-4"], "b")]
    result = kubernetes.parse(
        as_list(devices, *claims, pod("a", {"g": "known"}), pod("b", {"g": "unknown"})), cluster="c1"
    )
    found = running(result)
    assert found["a"].device_ids == ["MIG-GPU-a/2"] and found["b"].device_ids == []
    assert [(g.kind, g.count, g.profile) for g in found["b"].gpus] == [("mig", 1, "3g.40gb")]
    assert found["b"].requested_gpus == pytest.approx(3 / 7)
    assert result.notes == [
        "MIG device gpu-node-1/gpu-0-mig-9-0-4 of ResourceClaim ml/unknown: its ResourceSlice "
        "gives no GPU instance id, so the instance is counted on its node without a device id"
    ]


def test_a_claim_of_another_driver_is_no_gpu() -> None:
    nic = resource_slice({"name": "nic-0", "attributes": {"uuid": {"string": "NIC-0"}}}, driver="net.example.com")
    result = kubernetes.parse(
        as_list(nic, claim("net", ["nic-0"], "a", driver="net.example.com"), pod("a", {"n": "net"})), cluster="c1"
    )
    assert result.events == [] and result.dead_letters == []
    assert result.notes == [
        "1 pod(s) hold no GPU (no nvidia.com/gpu or MIG resource, no GPU claim): nothing to attribute for them"
    ]


def test_a_pending_pod_asks_for_what_its_unallocated_claim_requests() -> None:
    result = kubernetes.parse(as_list(claim("later", None), pod("a", {"gpu": "later"}, running=False)), cluster="c1")
    assert [(e.type, e.data.requested_gpus, e.data.claims) for e in result.events] == [
        ("allocation.pending", 1.0, ["ml/later"])
    ]


def test_the_newest_generation_of_a_pool_wins() -> None:
    old = resource_slice(gpu("gpu-0", "GPU-old"), generation=1)
    new = resource_slice(gpu("gpu-0", "GPU-a"), gpu("gpu-1", "GPU-b"), generation=2)
    for slices in ((old, new), (new, old)):
        assert placements(kubernetes.parse(as_list(*slices, *CLAIMS, *PODS), cluster="c1")) == SCENARIO


@pytest.mark.skipif(not REALWORLD.exists(), reason="the shared real-world sample is not on this machine")
def test_a_real_pod_list_without_gpus_says_so() -> None:
    result = kubernetes.parse(REALWORLD.read_bytes(), cluster="c1")
    count = len(orjson.loads(REALWORLD.read_bytes())["items"])
    assert result.events == [] and result.dead_letters == []
    assert result.notes == [
        f"{count} pod(s) hold no GPU (no nvidia.com/gpu or MIG resource, no GPU claim): nothing to attribute for them"
    ]


def test_pods_without_gpus_are_counted_in_one_note() -> None:
    cpu = [
        {
            **pod(name, {}),
            "spec": {"containers": [{"name": "web", "resources": {"limits": {"cpu": "1"}}}], "nodeName": NODE},
        }
        for name in ("web-1", "web-2")
    ]
    result = kubernetes.parse(as_list(*cpu, *cpu), cluster="c1")  # listed twice: still two pods
    assert result.events == [] and result.dead_letters == []
    assert result.notes == [
        "2 pod(s) hold no GPU (no nvidia.com/gpu or MIG resource, no GPU claim): nothing to attribute for them"
    ]


# --------------------------------------------------------------------------------- gpuledger ingest
DRA = Path(__file__).resolve().parents[1] / "fixtures" / "kubernetes" / "dra"


def ingest(*files: Path) -> dict[str, Any]:
    args = [arg for f in files for arg in ("--file", str(f))]
    done = subprocess.run(
        [sys.executable, "-m", "gpuledger.cli.main", "ingest", "kubernetes", *args, "--dry-run", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    summary: dict[str, Any] = json.loads(done.stdout)
    return summary


def test_ingest_reads_pods_claims_and_slices_given_as_several_files_or_a_directory() -> None:
    files = [DRA / "pods.json", DRA / "resourceclaims.json", DRA / "resourceslices.json"]
    for summary in (ingest(*files), ingest(DRA)):
        assert (summary["events"], summary["dead_letters"], summary["notes"]) == (6, 0, [])
        assert summary["by_type"] == {"allocation.pending": 3, "allocation.running": 3}


def test_ingest_of_claims_alone_says_the_pods_are_needed() -> None:
    summary = ingest(DRA / "resourceclaims.json")
    assert summary["events"] == 0 and "kubectl get pods -A -o json" in summary["notes"][0]


# --------------------------------------------------------------------------------- garbage
@FUZZ
@given(data=st.data())
def test_mutated_claims_slices_and_pods_become_dead_letters_not_crashes(data: st.DataObject) -> None:
    doc = _mutate(orjson.loads(as_list(SLICE, *CLAIMS, *PODS)), data)
    check(kubernetes.parse, orjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS))  # valid events, one-line reasons


def test_a_template_claim_the_pod_needs_none_of_is_no_gpu_and_one_not_made_yet_is_a_dead_letter() -> None:
    unneeded = pod("a", {"gpu": "template:one-gpu"})
    unneeded["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": None}]
    result = kubernetes.parse(as_list(unneeded, pod("b", {"gpu": "template:one-gpu"})), cluster="c1")
    assert result.events == [] and len(result.notes) == 1 and result.notes[0].startswith("1 pod(s) hold no GPU")
    assert [d.reason.split(":")[0] for d in result.dead_letters] == [
        "the ResourceClaim of pod claim 'gpu' is not in the input"
    ]
