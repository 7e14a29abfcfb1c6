"""The simulator's modern GPU sharing (``modern_sharing``): time-slicing and MPS declared by the
node's labels, DRA claims and slices, an exporter without NODE_NAME — and its ground truth."""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.simulator import simulate
from pipelines.simulator.simulate import SimulationResult

# sha256 over (relative path, bytes) of every file, as the simulator wrote them before the switch existed
BEFORE = {
    (3, 2.0, 11): "4df0c00bd2911174df75020107fb0def5d73d100439a693221b645edd86d0666",
    (8, 3.0, 5): "2269c1f4cf268f92cbc5bdd24ff898bdd7248b9779e370bbe00f12226262536c",
}


def _digest(out: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(out.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(out)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


@pytest.mark.parametrize("args", sorted(BEFORE))
def test_switch_off_writes_the_same_bytes_as_before(args: tuple[int, float, int], tmp_path: Path) -> None:
    simulate(*args, tmp_path)
    assert _digest(tmp_path) == BEFORE[args]


@pytest.fixture(scope="module")
def modern(tmp_path_factory: pytest.TempPathFactory) -> SimulationResult:
    return simulate(8, 3.0, 5, tmp_path_factory.mktemp("modern"), modern_sharing=True)


def _json(result: SimulationResult, rel: str) -> dict:
    return orjson.loads(result.path(rel).read_bytes())


def _sharing(result: SimulationResult) -> dict:
    return result.truth["modern_sharing"]


def test_switch_on_changes_the_output(modern: SimulationResult) -> None:
    assert _digest(modern.out_dir) != BEFORE[(8, 3.0, 5)]


def test_shared_nodes_declare_their_replicas_in_gpu_feature_discovery_labels(modern: SimulationResult) -> None:
    nodes = {n["metadata"]["name"]: n for n in _json(modern, "kubernetes/nodes.json")["items"]}
    sharing = _sharing(modern)
    for strategy, replicas in (("time-slicing", 10), ("mps", 2)):
        name = sharing[strategy]
        labels, status = nodes[name]["metadata"]["labels"], nodes[name]["status"]
        assert labels["nvidia.com/gpu.replicas"] == str(replicas)
        assert labels["nvidia.com/gpu.sharing-strategy"] == strategy
        assert labels["nvidia.com/gpu.count"] == "8"
        assert status["capacity"]["nvidia.com/gpu"] == status["allocatable"]["nvidia.com/gpu"] == str(8 * replicas)
    plain = [n for name, n in nodes.items() if name not in (sharing["time-slicing"], sharing["mps"])]
    assert plain and all("nvidia.com/gpu.replicas" not in n["metadata"]["labels"] for n in plain)


def _pods(result: SimulationResult) -> dict[str, dict]:
    """Each pod's last object in the watch stream, by uid."""
    pods = {}
    for line in result.path("kubernetes/pods.watch.jsonl").read_text().splitlines():
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        obj = event["object"]
        if event["type"] != "BOOKMARK" and obj["spec"].get("nodeName") and obj["metadata"].get("annotations"):
            pods[obj["metadata"]["uid"]] = obj
    return pods


def test_pods_on_shared_nodes_ask_for_plain_gpus_and_hold_replicas(modern: SimulationResult) -> None:
    sharing = _sharing(modern)
    gpus = {g: v for g, v in modern.truth["gpus"].items()}
    for strategy in ("time-slicing", "mps"):
        node = sharing[strategy]
        on = [p for p in _pods(modern).values() if p["spec"]["nodeName"] == node]
        assert on, f"no pod ran on the {strategy} node"
        for pod in on:
            limits = pod["spec"]["containers"][0]["resources"]["limits"]
            assert limits["nvidia.com/gpu"] == "1" and "nvidia.com/gpu.shared" not in limits
            annotations = pod["metadata"]["annotations"]
            assert "gpuledger.io/replicas" not in annotations
            uuid, _, replica = annotations["gpuledger.io/devices"].partition("::")
            assert gpus[uuid]["node"] == node and 0 <= int(replica) < (10 if strategy == "time-slicing" else 2)


def _span(result: SimulationResult, attempt: dict) -> float:
    from datetime import datetime

    def t(s: str) -> float:
        return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()

    lo, hi = t(result.truth["start"]), t(result.truth["end"])
    start, end = max(t(attempt["start"]), lo), min(t(attempt["end"]) if attempt["end"] else hi, hi)
    return max(end - start, 0.0)


def test_truth_gives_each_replica_one_nth_of_its_gpu(modern: SimulationResult) -> None:
    sharing = _sharing(modern)
    for strategy, replicas in (("time-slicing", 10), ("mps", 2)):
        mine = [a for a in modern.truth["attempts"] if a["nodes"] == [sharing[strategy]]]
        assert mine
        for attempt in mine:
            assert attempt["gpu_seconds"] == pytest.approx(_span(modern, attempt) / replicas, abs=1e-9)


def test_capacity_is_conserved_against_the_physical_gpus(modern: SimulationResult) -> None:
    truth = modern.truth
    for uuid, gpu in truth["gpus"].items():
        parts = gpu["allocated_gpu_seconds"] + gpu["unallocated_gpu_seconds"] + gpu["unavailable_gpu_seconds"]
        assert parts == pytest.approx(gpu["capacity_gpu_seconds"], abs=1e-6), uuid
        assert gpu["capacity_gpu_seconds"] == pytest.approx(3 * 3600)
    assert truth["capacity_gpu_seconds"] == pytest.approx(8 * 8 * 3 * 3600)
    total = truth["allocated_gpu_seconds"] + truth["unallocated_gpu_seconds"] + truth["unavailable_gpu_seconds"]
    assert total == pytest.approx(truth["capacity_gpu_seconds"], abs=1e-6)
    assert sum(a["gpu_seconds"] for a in truth["attempts"]) == pytest.approx(truth["allocated_gpu_seconds"], abs=1e-6)


def test_exporter_without_node_name_labels_its_pod_and_prometheus_the_node(modern: SimulationResult) -> None:
    blind = _sharing(modern)["exporter_without_node_name"]
    node, hostname = blind["node"], blind["hostname"]
    assert hostname.startswith("dcgm-exporter-") and len(hostname) == len("dcgm-exporter-") + 5
    series = _json(modern, "dcgm/query_range.json")["data"]["result"]
    mine = [s["metric"] for s in series if s["metric"].get("kubernetes_node") == node]
    assert mine and all(m.get("Hostname", m.get("hostname")) == hostname for m in mine)
    assert not any(node in (s["metric"].get("Hostname"), s["metric"].get("hostname")) for s in series)
    others = [s["metric"] for s in series if "kubernetes_node" not in s["metric"]]
    assert others


def _dra_pods(result: SimulationResult) -> list[dict]:
    """The last watch object of every pod that holds GPUs through a DRA claim."""
    pods: dict[str, dict] = {}
    for line in result.path("kubernetes/pods.watch.jsonl").read_text().splitlines():
        try:
            obj = orjson.loads(line)["object"]
        except orjson.JSONDecodeError:
            continue
        if obj.get("spec", {}).get("resourceClaims") and obj["spec"].get("nodeName"):
            pods[obj["metadata"]["uid"]] = obj
    return list(pods.values())


def test_dra_pods_hold_claims_allocated_devices_of_the_nodes_slice(modern: SimulationResult) -> None:
    node = _sharing(modern)["dra"]
    claims = {
        (c["metadata"]["namespace"], c["metadata"]["name"]): c
        for c in _json(modern, "kubernetes/resourceclaims.json")["items"]
    }
    slices = _json(modern, "kubernetes/resourceslices.json")["items"]
    assert [s["spec"]["nodeName"] for s in slices] == [node]
    assert slices[0]["spec"]["driver"] == "gpu.nvidia.com" and slices[0]["spec"]["pool"]["name"] == node
    devices = {d["name"]: d["attributes"] for d in slices[0]["spec"]["devices"]}
    uuids = {n: a["uuid"]["string"] for n, a in devices.items() if a["type"]["string"] == "gpu"}
    assert {modern.truth["gpus"][u]["node"] for u in uuids.values()} == {node} and len(uuids) == 7
    migs = {n: a for n, a in devices.items() if a["type"]["string"] == "mig"}
    assert migs and all(a["uuid"]["string"].startswith("MIG-") for a in migs.values())
    assert {modern.truth["gpus"][a["parentUUID"]["string"]]["layout"] for a in migs.values()} == {"mig"}
    pods = _dra_pods(modern)
    assert len(pods) > 3
    shared = 0
    for pod in pods:
        assert pod["spec"]["nodeName"] == node
        limits = pod["spec"]["containers"][0]["resources"]["limits"]
        assert not any(k.startswith("nvidia.com/") for k in limits)
        assert "gpuledger.io/devices" not in pod["metadata"].get("annotations", {})
        ref = pod["spec"]["resourceClaims"][0]
        name = ref.get("resourceClaimName") or pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        claim = claims[(pod["metadata"]["namespace"], name)]
        results = claim["status"]["allocation"]["devices"]["results"]
        assert {(r["driver"], r["pool"]) for r in results} == {("gpu.nvidia.com", node)}
        assert all(r["device"] in devices for r in results)
        mig = [r["device"] for r in results if r["device"] in migs]
        limits_mig = pod["spec"]["containers"][0]["resources"]["limits"]
        assert not mig or (len(results) == 1 and not any("mig" in k for k in limits_mig))
        if "resourceClaimName" in ref:
            shared += 1
            assert [r["device"] for r in results] == [_sharing(modern)["shared_claim_devices"][0]["device"]]
        else:
            assert claim["status"]["reservedFor"] == [
                {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
            ]
    assert shared >= 2
    claimed_migs = {r["device"] for c in claims.values() for r in c["status"]["allocation"]["devices"]["results"]}
    assert claimed_migs & set(migs), "no pod held a MIG instance through a claim"


def _is_instance(labels: dict[str, str], devices: dict[str, dict]) -> bool:
    """Whether the MIG series' DRA device is a MIG device of the slice with its parent and profile."""
    device = devices[labels["dra_device_name"]]
    return bool(
        device["type"]["string"] == "mig"
        and device["parentUUID"]["string"] == labels["UUID"]
        and device["profile"]["string"] == labels["GPU_I_PROFILE"]
    )


def test_dcgm_series_of_dra_devices_name_the_claim_and_repeat_per_holder(modern: SimulationResult) -> None:
    node = _sharing(modern)["dra"]
    device = _sharing(modern)["shared_claim_devices"][0]
    series = [
        s
        for s in _json(modern, "dcgm/query_range.json")["data"]["result"]
        if node in (s["metric"].get("Hostname"), s["metric"].get("hostname"))
    ]
    held = [s["metric"] for s in series if "pod" in s["metric"]]
    slice_devices = {
        d["name"]: d["attributes"]
        for d in _json(modern, "kubernetes/resourceslices.json")["items"][0]["spec"]["devices"]
    }
    assert held and all(
        m["dra_driver_name"] == "gpu.nvidia.com"
        and m["dra_pool_name"] == node
        and m["dra_claim_namespace"] == m["namespace"]
        and (m["dra_device_name"] == f"gpu-{m['gpu']}" if "GPU_I_ID" not in m else _is_instance(m, slice_devices))
        for m in held
    )
    assert any("GPU_I_ID" in m for m in held)
    util = [
        s
        for s in series
        if s["metric"]["__name__"] == "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
        and s["metric"]["UUID"] == device["uuid"]
        and "pod" in s["metric"]
    ]
    pods_at: dict[float, set[str]] = {}
    for s in util:
        for t, _ in s["values"]:
            pods_at.setdefault(t, set()).add(s["metric"]["pod"])
    assert max(len(p) for p in pods_at.values()) >= 2
    assert {s["metric"]["dra_claim_name"] for s in util} == {"llama-8b-shared-gpu"}


def test_truth_splits_a_shared_claim_equally_among_its_holders_at_each_instant(modern: SimulationResult) -> None:
    from datetime import datetime

    def t(s: str) -> int:
        return int(datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp())

    lo, hi = t(modern.truth["start"]), t(modern.truth["end"])
    holders = [a for a in modern.truth["attempts"] if "llama-8b-shared" in a["job_id"]]
    spans = [(max(t(a["start"]), lo), min(t(a["end"]) if a["end"] else hi, hi)) for a in holders]
    counts = [0] * (hi - lo)
    for a, b in spans:
        for second in range(a, b):
            counts[second - lo] += 1
    assert max(counts) >= 2
    for attempt, (a, b) in zip(holders, spans, strict=True):
        expected = sum(1 / counts[second - lo] for second in range(a, b))
        assert attempt["gpu_seconds"] == pytest.approx(expected, abs=1e-6)
    device = modern.truth["gpus"][_sharing(modern)["shared_claim_devices"][0]["uuid"]]
    assert device["allocated_gpu_seconds"] == pytest.approx(sum(1 for c in counts if c), abs=1e-6)


def test_manifest_ingests_nodes_first_and_claims_with_the_pods(modern: SimulationResult) -> None:
    files = modern.manifest["files"]
    paths = [f["path"] for f in files]
    nodes, pods = files[paths.index("kubernetes/nodes.json")], files[paths.index("kubernetes/pods.watch.jsonl")]
    assert paths.index("kubernetes/nodes.json") < paths.index("kubernetes/pods.watch.jsonl")
    assert nodes["source"] == "kubernetes" and nodes["hints"] == {"time": modern.truth["start"]}
    assert pods["with"] == ["kubernetes/resourceclaims.json", "kubernetes/resourceslices.json"]
    assert all(modern.path(rel).is_file() for rel in [*paths, *pods["with"]])
    assert not set(pods["with"]) & set(paths)


def test_live_exporter_serves_the_blind_node_under_its_name_without_the_target_label(modern: SimulationResult) -> None:
    import urllib.request

    from pipelines.simulator import serve_exporter

    blind = _sharing(modern)["exporter_without_node_name"]
    with serve_exporter(modern) as handle:
        handle.freeze(modern.config.at(600))
        body = urllib.request.urlopen(f"{handle.url.removesuffix('/metrics')}/nodes/{blind['node']}/metrics").read()
    text = body.decode()
    assert f'"{blind["hostname"]}"' in text and "kubernetes_node" not in text and blind["node"] not in text


def test_command_line_switches_modern_sharing_on(tmp_path: Path) -> None:
    from pipelines.simulator.__main__ import main

    assert main(["--nodes", "8", "--hours", "1", "--seed", "5", "--out", str(tmp_path), "--modern-sharing"]) == 0
    assert (tmp_path / "kubernetes" / "resourceclaims.json").exists()
    assert orjson.loads((tmp_path / "truth.json").read_bytes())["modern_sharing"]["dra"] == "gpu003"


@pytest.mark.parametrize("group", ["team", "model", "node"])
def test_idle_causes_split_exactly_the_idle_time_of_shared_holders(modern: SimulationResult, group: str) -> None:
    for key, parts in modern.truth["idle_causes"][group].items():
        row = modern.truth["by"][group][key]
        idle = row["allocated_gpu_seconds"] - row["busy_gpu_seconds"] - row["unobserved_gpu_seconds"]
        assert sum(v for c, v in parts.items() if c != "unobserved") == pytest.approx(idle, abs=1e-6), key
        assert all(v >= -1e-9 for c, v in parts.items() if c != "idle"), key


def test_cost_truth_conserves_the_cluster_cost_with_shared_gpus(modern: SimulationResult) -> None:
    from pipelines.simulator.writers.reference import GPU_HOURLY, MONTHLY

    gpus = sum(float(GPU_HOURLY[g["gpu_model"]]) for g in modern.truth["gpus"].values())
    shared = sum(MONTHLY.values()) / 30
    assert sum(modern.truth["cost_by_model"].values()) == pytest.approx(gpus * 3 + shared, rel=1e-12)


def test_todays_parsers_read_every_listed_file_with_only_the_planted_dead_letters(modern: SimulationResult) -> None:
    from pipelines.parsers.registry import parse_manifest_entry

    for entry in modern.manifest["files"]:
        result = parse_manifest_entry(modern.out_dir, entry, "sim")
        assert result.events, entry["path"]
        assert len(result.dead_letters) == entry["malformed_records"], entry["path"]


@pytest.mark.parametrize(("nodes", "hours", "seed"), [(2, 1.0, 1), (5, 2.0, 3), (12, 3.0, 4)])
def test_every_size_conserves_capacity_and_gives_replicas_their_share(
    tmp_path: Path, nodes: int, hours: float, seed: int
) -> None:
    result = simulate(nodes, hours, seed, tmp_path, modern_sharing=True)
    truth, sharing = result.truth, _sharing(result)
    for gpu in truth["gpus"].values():
        parts = gpu["allocated_gpu_seconds"] + gpu["unallocated_gpu_seconds"] + gpu["unavailable_gpu_seconds"]
        assert parts == pytest.approx(gpu["capacity_gpu_seconds"], abs=1e-6)
    assert sum(a["gpu_seconds"] for a in truth["attempts"]) == pytest.approx(truth["allocated_gpu_seconds"], abs=1e-6)
    for node, replicas in sharing["replicas"].items():
        for attempt in (a for a in truth["attempts"] if a["nodes"] == [node]):
            assert attempt["gpu_seconds"] == pytest.approx(_span(result, attempt) / replicas, abs=1e-9)
    assert sharing["exporter_without_node_name"]["node"] == "gpu001"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 500), st.integers(1, 300)), min_size=1, max_size=3))
def test_claim_shares_split_the_device_exactly_among_its_holders(spans: list[tuple[int, int]]) -> None:
    """Summed over the holders, the shares of a shared claim's device are the time anyone held it,
    and each second goes equally to the holders of that second."""
    from types import SimpleNamespace

    from pipelines.simulator.config import UNIT
    from pipelines.simulator.model.cluster import Gpu, Slot
    from pipelines.simulator.sharing import ClaimShares

    horizon = 800
    gpu = Gpu("n", 7, "GPU-x", "00000000:DB:00.0", "claim", replicas=3)
    seats = [Slot(gpu, "claim", UNIT, f"GPU-x#seat{r}", "GPU-x", "GPU-x", replica=r) for r in range(3)]
    attempts = [SimpleNamespace(start=a, end=a + d, slots=[seats[i]]) for i, (a, d) in enumerate(spans)]
    shares = ClaimShares(attempts, horizon)  # type: ignore[arg-type]
    per_second = [0] * horizon
    for a, d in spans:
        for t in range(a, min(a + d, horizon)):
            per_second[t] += 1
    total = 0
    for attempt in attempts:
        b = min(attempt.end, horizon)
        got = sum(w * (hi - lo) for lo, hi, w in shares.pieces(attempt.slots[0], attempt.start, b))
        assert got == sum(UNIT // per_second[t] for t in range(attempt.start, b))
        total += got
    assert total == UNIT * sum(1 for n in per_second if n)


def test_the_blind_exporter_is_one_scrape_target_at_its_pods_address(modern: SimulationResult) -> None:
    node = _sharing(modern)["exporter_without_node_name"]["node"]
    series = _json(modern, "dcgm/query_range.json")["data"]["result"]
    instances = {s["metric"]["instance"] for s in series if s["metric"].get("kubernetes_node") == node}
    assert len(instances) == 1 and instances.pop().startswith("10.244.")
