"""The cluster simulator: determinism, the ground truth's own invariants, the real formats (read back
with gpuledger's parsers), and the live dcgm-exporter endpoint."""

from __future__ import annotations

import math
import urllib.error
import urllib.request
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.simulator import SimulationResult, serve_exporter, simulate
from pipelines.simulator.__main__ import main
from pipelines.simulator.intervals import StepIntegral
from pipelines.simulator.truth import observed

EPS = 1e-6
SOURCES = {"org", "pricing", "kubernetes", "slurm", "dcgm", "storage", "nccl", "outputs"}
REASONS = {
    "kubernetes": {"oom", "app_error", "preempted", "timeout", "node_failure"},
    "slurm": {"oom", "app_error", "preempted", "timeout", "cancelled", "node_failure"},
}


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> SimulationResult:
    return simulate(3, 2.0, 11, tmp_path_factory.mktemp("small"))


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> SimulationResult:
    """12 nodes (6 Slurm: two acceptance node sets), 3 h from an unaligned start."""
    start = datetime(2026, 11, 2, 0, 17, 23, tzinfo=UTC)
    return simulate(12, 3.0, 4, tmp_path_factory.mktemp("wide"), start)


def load(result: SimulationResult, rel: str) -> Any:
    return orjson.loads(result.path(rel).read_bytes())


def rows(truth: dict[str, Any], group: str) -> dict[str, dict[str, float]]:
    return truth["by"][group]


# --- determinism ---------------------------------------------------------------------------------
def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_same_seed_gives_byte_identical_files(small: SimulationResult, tmp_path: Path) -> None:
    again = simulate(3, 2.0, 11, tmp_path)
    assert tree(tmp_path) == tree(small.out_dir)
    assert again.truth == small.truth


def test_another_seed_gives_other_files(small: SimulationResult, tmp_path: Path) -> None:
    other = simulate(3, 2.0, 12, tmp_path)
    assert other.truth["allocated_gpu_seconds"] != small.truth["allocated_gpu_seconds"]
    assert tree(tmp_path)["dcgm/query_range.json"] != tree(small.out_dir)["dcgm/query_range.json"]


# --- manifest ------------------------------------------------------------------------------------
def test_manifest_lists_every_file_once_with_its_source(wide: SimulationResult) -> None:
    manifest = load(wide, "manifest.json")
    listed = [f["path"] for f in manifest["files"]]
    on_disk = set(tree(wide.out_dir)) - {"manifest.json", "truth.json"}
    assert sorted(listed) == sorted(on_disk)
    assert {f["source"] for f in manifest["files"]} == SOURCES
    assert manifest["truth"] == "truth.json" and manifest["cluster"] == wide.truth["cluster"]
    assert {f["path"]: f["malformed_records"] for f in manifest["files"]} == wide.truth["malformed_records"]


# --- the truth's own invariants ------------------------------------------------------------------
@pytest.mark.parametrize("group", ["node", "gpu_model", "cluster"])
def test_capacity_is_conserved_per_group(wide: SimulationResult, group: str) -> None:
    for key, row in rows(wide.truth, group).items():
        parts = row["allocated_gpu_seconds"] + row["unallocated_gpu_seconds"] + row["unavailable_gpu_seconds"]
        assert abs(row["capacity_gpu_seconds"] - parts) < EPS, key


def test_capacity_is_conserved_per_gpu_and_totals_add_up(wide: SimulationResult) -> None:
    truth = wide.truth
    for uuid, gpu in truth["gpus"].items():
        parts = gpu["allocated_gpu_seconds"] + gpu["unallocated_gpu_seconds"] + gpu["unavailable_gpu_seconds"]
        assert abs(gpu["capacity_gpu_seconds"] - parts) < EPS, uuid
        assert gpu["capacity_gpu_seconds"] == 3 * 3600
    assert truth["capacity_gpu_seconds"] == 12 * 8 * 3 * 3600
    assert truth["unavailable_gpu_seconds"] > 0  # a fatal XID outlived the job it killed


@pytest.mark.parametrize(
    "group",
    ["team", "business_unit", "model", "failure_reason", "gpu_model", "node", "cluster", "job", "namespace", "account"],
)
def test_busy_failed_lost_unobserved_are_bounded_per_group(wide: SimulationResult, group: str) -> None:
    for key, row in rows(wide.truth, group).items():
        alloc = row["allocated_gpu_seconds"]
        assert row["busy_gpu_seconds"] + row["unobserved_gpu_seconds"] <= alloc + EPS, key
        assert row["lost_gpu_seconds"] <= row["failed_gpu_seconds"] + EPS <= alloc + 2 * EPS, key


@pytest.mark.parametrize("group", ["team", "business_unit", "model", "failure_reason", "gpu_model", "node"])
def test_groups_partition_the_totals(wide: SimulationResult, group: str) -> None:
    for field in ("allocated", "busy", "failed", "unobserved", "lost"):
        total = math.fsum(r[f"{field}_gpu_seconds"] for r in rows(wide.truth, group).values())
        assert abs(total - wide.truth[f"{field}_gpu_seconds"]) < 1e-3, (group, field)


def test_namespace_and_account_split_the_schedulers(wide: SimulationResult) -> None:
    by_scheduler: dict[str, float] = defaultdict(float)
    for attempt in wide.truth["attempts"]:
        by_scheduler[attempt["scheduler"]] += attempt["gpu_seconds"]
    ns = math.fsum(r["allocated_gpu_seconds"] for r in rows(wide.truth, "namespace").values())
    acct = math.fsum(r["allocated_gpu_seconds"] for r in rows(wide.truth, "account").values())
    assert abs(ns - by_scheduler["kubernetes"]) < 1e-3 and abs(acct - by_scheduler["slurm"]) < 1e-3


def test_attempt_records_are_consistent(wide: SimulationResult) -> None:
    attempts = wide.truth["attempts"]
    assert abs(math.fsum(a["gpu_seconds"] for a in attempts) - wide.truth["allocated_gpu_seconds"]) < 1e-3
    for a in attempts:
        assert a["queue_seconds"] >= 0 and a["start"] >= a["submit"]
        assert (a["outcome"] == "failure") == (a["failure_reason"] is not None)
        assert (a["outcome"] == "running") == (a["end"] is None)
        assert 0 <= a["lost_gpu_seconds"] <= a["gpu_seconds"] + EPS
        assert a["lost_gpu_seconds"] == 0 or a["outcome"] == "failure"
    partial = [a for a in attempts if a["outcome"] == "failure" and 0 < a["lost_gpu_seconds"] < a["gpu_seconds"]]
    assert partial, "a checkpointed attempt failed: its lost work is less than the attempt"


def test_owners_cover_the_org_cases(wide: SimulationResult) -> None:
    teams = rows(wide.truth, "team")
    assert "unassigned" in teams and "speech" not in teams  # unmapped namespace; a team with no usage
    assert {"research", "product", "risk", "infrastructure"} <= set(rows(wide.truth, "business_unit"))
    overridden = [a for a in wide.truth["attempts"] if a["namespace"] == "notebooks" and a["team"] != "vision"]
    assert overridden, "a pod's team label overrides its namespace mapping"
    assert "unknown" in rows(wide.truth, "model")
    versions = wide.truth["org_versions"]
    assert [v["effective_from"] for v in versions] == ["2026-11-02T00:00:00Z", "2026-11-02T01:00:00Z"]


@pytest.mark.parametrize(("nodes", "hours", "seed"), [(2, 2.0, 3), (2, 2.0, 8), (3, 2.5, 5), (4, 3.0, 1)])
def test_every_failure_class_happens(tmp_path: Path, nodes: int, hours: float, seed: int) -> None:
    truth = simulate(nodes, hours, seed, tmp_path).truth
    for scheduler, wanted in REASONS.items():
        seen = {a["failure_reason"] for a in truth["attempts"] if a["scheduler"] == scheduler}
        assert wanted <= seen, (scheduler, wanted - seen)
    assert truth["scrape_gap"] is not None and truth["scrape_gap"]["missing_scrapes"] > 3
    assert truth["unobserved_gpu_seconds"] > 0 and len(truth["xid_intervals"]) >= 2


# --- step integrals and sample-and-hold ----------------------------------------------------------
@settings(max_examples=150, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=30), st.integers(1, 40), st.data())
def test_step_integral_equals_the_sum_over_seconds(values: list[float], dt: int, data: st.DataObject) -> None:
    horizon = data.draw(st.integers((len(values) - 1) * dt + 1, len(values) * dt))
    a = data.draw(st.integers(0, horizon - 1))
    b = data.draw(st.integers(a + 1, horizon))
    brute = math.fsum(values[t // dt] for t in range(a, b))
    assert abs(StepIntegral(np.array(values), dt, horizon).over(a, b) - brute) < 1e-9
    integral = StepIntegral(np.array(values), dt, horizon)
    both = integral.upto(np.array([a, b]))
    assert abs(both[1] - both[0] - brute) < 1e-9


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.booleans()), min_size=1, max_size=40))
def test_observed_holds_a_sample_for_three_intervals(points: list[tuple[float, bool]]) -> None:
    util = np.array([u for u, _ in points])
    sampled = np.array([s for _, s in points])
    values, unobserved = observed(util, sampled)
    last = None
    for k, (_, s) in enumerate(points):
        last = k if s else last
        held = last is not None and k - last < 3
        assert bool(unobserved[k]) == (not held)
        assert values[k] == (util[last] if held else 0.0)


# --- real formats, read back with the parsers ----------------------------------------------------
def parser_for(entry: dict[str, Any]) -> Any:
    from pipelines.parsers import checkpoint, dcgm, kubernetes, nccl, outputs, reference, slurm, storage

    if entry.get("format") == "checkpoint":
        return checkpoint
    return {
        "org": reference,
        "pricing": reference,
        "kubernetes": kubernetes,
        "slurm": slurm,
        "dcgm": dcgm,
        "storage": storage,
        "nccl": nccl,
        "outputs": outputs,
    }[entry["source"]]


def test_every_file_parses_with_exactly_the_stated_dead_letters(small: SimulationResult) -> None:
    for entry in small.manifest["files"]:
        result = parser_for(entry).parse(
            small.path(entry["path"]).read_bytes(), cluster=small.truth["cluster"], origin=entry["path"]
        )
        assert result.events or entry["path"] == "slurm/squeue.json", entry["path"]  # squeue may be empty
        assert len(result.dead_letters) == small.truth["malformed_records"][entry["path"]], (
            entry["path"],
            [d.reason for d in result.dead_letters],
        )


def latest_placements(result: SimulationResult) -> dict[tuple[str, int], list[Any]]:
    from pipelines.parsers import kubernetes, slurm

    order = {"allocation.pending": 0, "allocation.running": 1, "allocation.ended": 2}
    latest: dict[tuple[str, int, str], Any] = {}
    for rel, parser in (
        ("kubernetes/pods.watch.jsonl", kubernetes),
        ("slurm/sacct.json", slurm),
        ("slurm/squeue.json", slurm),
    ):
        for event in parser.parse(result.path(rel).read_bytes(), cluster=result.truth["cluster"]).events:
            d = event.data
            key = (d.job_id, d.attempt, d.node)
            if (
                d.node
                and d.state != "pending"
                and (
                    key not in latest or (order[event.type], event.time) >= (order[latest[key].type], latest[key].time)
                )
            ):
                latest[key] = event
    out: dict[tuple[str, int], list[Any]] = defaultdict(list)
    for (job, attempt, _), event in latest.items():
        out[(job, attempt)].append(event.data)
    return out


def stamp(moment: datetime | None) -> str | None:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ") if moment else None


def test_parsed_scheduler_files_tell_the_truths_attempts(small: SimulationResult) -> None:
    parsed = latest_placements(small)
    assert set(parsed) == {(a["job_id"], a["attempt"]) for a in small.truth["attempts"]}
    for a in small.truth["attempts"]:
        placements = parsed[(a["job_id"], a["attempt"])]
        d = placements[0]
        ended = d.state == "ended"
        assert stamp(d.start_time) == a["start"] and (stamp(d.end_time) if ended else None) == a["end"], a
        assert (d.outcome if ended else "running") == a["outcome"], a
        assert (d.failure_reason if ended else None) == a["failure_reason"], a
        assert sorted(p.node for p in placements) == sorted(a["nodes"]) and d.logical_job == a["logical_job"]
        assert abs(sum(p.gpu_equivalents for p in placements) - a["gpus"]) < EPS, a


def test_busy_recomputed_from_parsed_metrics_matches_the_truth(small: SimulationResult) -> None:
    from pipelines.gpu_columns import per_scrape
    from pipelines.parsers import dcgm

    step, end = small.truth["scrape_interval_s"], small.config.end.timestamp()
    samples: dict[tuple[str, int | None], list[tuple[float, float]]] = defaultdict(list)
    index: dict[tuple[str, int | None], str] = {}
    for event in per_scrape(dcgm.parse(small.path("dcgm/query_range.json").read_bytes(), cluster="x").events):
        for g in event.data.gpus:
            samples[(g.uuid, g.mig_instance)].append((event.time.timestamp(), g.utilization or 0.0))
            index[(event.data.node, g.index)] = g.uuid
    busy: dict[str, float] = defaultdict(float)
    for (job, _), placements in latest_placements(small).items():
        for d in placements:
            a, b = d.start_time.timestamp(), d.end_time.timestamp() if d.state == "ended" else end
            for key, weight in device_keys(d, index):
                points = sorted(samples[key])
                for i, (t, u) in enumerate(points):
                    until = min(points[i + 1][0] if i + 1 < len(points) else end, t + 3 * step)
                    busy[job] += weight * u * max(0.0, min(b, until) - max(a, t))
    for job, row in rows(small.truth, "job").items():
        assert abs(row["busy_gpu_seconds"] - busy[job]) < 1e-6 * max(1.0, busy[job]), job


def device_keys(d: Any, index: dict[tuple[str, int | None], str]) -> list[tuple[tuple[str, int | None], float]]:
    if not d.device_ids:
        return [((index[(d.node, i)], None), 1.0) for i in d.gpu_indices]
    keys: list[tuple[tuple[str, int | None], float]] = []
    for dev in d.device_ids:
        if dev.startswith("MIG-"):
            uuid, gi = dev[4:].rsplit("/", 1)
            keys.append(((uuid, int(gi)), d.gpu_equivalents))
        elif "::" in dev:
            keys.append(((dev.split("::")[0], None), d.gpu_equivalents))
        else:
            keys.append(((dev, None), 1.0))
    return keys


def test_slurm_json_shapes(wide: SimulationResult) -> None:
    from pipelines.parsers.hostlist import expand

    jobs = [
        j
        for j in load(wide, "slurm/sacct.json")["jobs"]
        if isinstance(j.get("job_id"), int) and isinstance(j["time"]["start"], int) and j["job_id"] < 99990
    ]
    started = [j for j in jobs if j["time"]["start"]]
    for job in started:
        assert isinstance(job["state"]["current"], list)
        gres = {t["name"]: t["count"] for t in job["tres"]["allocated"] if t["type"] == "gres"}
        typed = [n for n in gres if n.startswith("gpu:")]
        assert typed and sum(gres[n] for n in typed) == gres["gpu"]
        assert len(job["gres_detail"]) == len(expand(job["nodes"]))
    requeued = defaultdict(list)
    for job in jobs:
        requeued[job["job_id"]].append(job["restart_cnt"])
    assert any(len(r) > 1 for r in requeued.values())
    assert all(sorted(r) == list(range(len(r))) for r in requeued.values())
    assert any("[" in j["nodes"] for j in started)  # a multi-node job with a compressed hostlist
    squeue = load(wide, "slurm/squeue.json")
    assert {j["job_state"] for j in squeue["jobs"] if j["job_id"] < 99990} <= {"RUNNING", "PENDING"}


def test_watch_stream_order_and_event_types(wide: SimulationResult) -> None:
    lines = wide.path("kubernetes/pods.watch.jsonl").read_text().splitlines()
    events = []
    for line in lines:
        try:
            events.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            continue
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
    assert {e["type"] for e in events} == {"ADDED", "MODIFIED", "DELETED", "BOOKMARK"}
    first: dict[str, str] = {}
    for e in events:
        if e["type"] != "BOOKMARK":
            first.setdefault(e["object"]["metadata"]["uid"], e["type"])
    assert set(first.values()) == {"ADDED"}


def test_dcgm_series_labels_and_xid(small: SimulationResult) -> None:
    result = load(small, "dcgm/query_range.json")["data"]["result"]
    hosts = {("Hostname" in s["metric"], "hostname" in s["metric"]) for s in result}
    assert hosts == {(True, False), (False, True)}
    names_by_kind = defaultdict(set)
    for s in result:
        names_by_kind["mig" if "GPU_I_ID" in s["metric"] else "gpu"].add(s["metric"]["__name__"])
    assert "DCGM_FI_DEV_GPU_UTIL" not in names_by_kind["mig"] and "DCGM_FI_DEV_GPU_UTIL" in names_by_kind["gpu"]
    assert any("hpc_job" in s["metric"] for s in result) and any("pod" in s["metric"] for s in result)
    for xid in small.truth["xid_intervals"]:
        lo = datetime.fromisoformat(xid["from"].replace("Z", "+00:00")).timestamp()
        hi = datetime.fromisoformat(xid["to"].replace("Z", "+00:00")).timestamp()
        points = [
            (t, v)
            for s in result
            if s["metric"]["__name__"] == "DCGM_FI_DEV_XID_ERRORS" and s["metric"]["UUID"] == xid["gpu"]
            for t, v in s["values"]
        ]
        assert points and all((v == "79") == (lo <= t < hi) for t, v in points)


def test_acceptance_runs_show_the_degraded_node(wide: SimulationResult) -> None:
    runs = wide.truth["acceptance_runs"]
    assert len(runs) == 2 and sum(r["degraded"] for r in runs) == 1
    slow = next(r for r in runs if r["degraded"])
    fast = next(r for r in runs if not r["degraded"])
    assert wide.truth["degraded_node"] in slow["nodes"] and slow["avg_busbw_gbps"] < 0.6 * fast["avg_busbw_gbps"]
    text = wide.path(fast["file"]).read_text()
    assert "# Out of bounds values : 0 OK" in text and f"# Avg bus bandwidth    : {fast['avg_busbw_gbps']:.5g}" in text


# --- the live exporter ---------------------------------------------------------------------------
def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_exporter_serves_the_files_values_as_exposition_text(small: SimulationResult) -> None:
    from pipelines.parsers import dcgm

    step = small.truth["scrape_interval_s"]
    sim_time = small.config.start + timedelta(seconds=7 * step + 12)
    expected = {
        (s.labels["UUID"], s.labels.get("GPU_I_ID"), s.labels["__name__"]): s.values[
            int(np.flatnonzero(s.steps == 7)[0])
        ]
        for s in small.series
        if 7 in s.steps
    }
    with serve_exporter(small) as live, serve_exporter(small.out_dir) as from_files:
        for handle in (live, from_files):
            handle.freeze(sim_time)
        status, body = get(live.url)
        assert status == 200 and get(from_files.url) == (200, body)
        parsed = dcgm.parse_exposition(body, cluster="x", scrape_time=live.served[-1].sample_time)
        assert not parsed.dead_letters and {e.data.node for e in parsed.events} == {"gpu001", "gpu002", "gpu003"}
        served = {}
        for line in body.splitlines():
            if line.startswith("DCGM_FI"):
                name, rest = line.split("{", 1)
                labels = dict(part.split("=", 1) for part in rest.rsplit("}", 1)[0].split(","))
                served[(labels["UUID"].strip('"'), labels.get("GPU_I_ID", "").strip('"') or None, name)] = line.rsplit(
                    " ", 1
                )[1]
        assert served == expected
        assert live.served[-1].sample_time == small.config.start + timedelta(seconds=7 * step)


def test_exporter_node_endpoint_fails_during_the_gap_and_the_clock_runs(small: SimulationResult) -> None:
    gap = small.truth["scrape_gap"]
    inside = datetime.fromisoformat(gap["first_missing"].replace("Z", "+00:00")) + timedelta(seconds=1)
    with serve_exporter(small, speed=600.0) as handle:
        handle.freeze(inside)
        node_url = handle.url.replace("/metrics", f"/nodes/{gap['node']}/metrics")
        assert get(node_url)[0] == 503
        status, body = get(handle.url)
        assert status == 200 and f'"{gap["node"]}"' not in body
        handle.freeze(None)
        first = handle.sim_time()
        assert get(handle.url)[0] == 200
        assert handle.served[-1].sim_time > first - timedelta(seconds=1) and handle.sim_time() > first
        assert [s.status for s in handle.served[:2]] == [503, 200]


def test_command_line_writes_the_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--nodes", "2", "--hours", "1", "--seed", "5", "--out", str(tmp_path)]) == 0
    assert "GPU-h allocated" in capsys.readouterr().out
    assert (tmp_path / "truth.json").exists() and (tmp_path / "dcgm" / "query_range.json").exists()
    assert main(["--nodes", "1", "--hours", "1", "--out", str(tmp_path / "x")]) == 2


def test_time_sliced_pods_ask_for_plain_gpus_as_the_gpu_operator_ships_it(wide: SimulationResult) -> None:
    from pipelines import events as ev
    from pipelines.parsers.registry import Source, parse_file

    forms: dict[str, set[str]] = defaultdict(set)
    for line in wide.path("kubernetes/pods.watch.jsonl").read_text().splitlines():
        try:
            pod = orjson.loads(line)["object"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            continue
        devices = pod.get("metadata", {}).get("annotations", {}).get("gpuledger.io/devices", "")
        if "::" in devices:
            limits = pod["spec"]["containers"][0]["resources"]["limits"]
            forms["shared" if "nvidia.com/gpu.shared" in limits else "plain"].add(pod["metadata"]["uid"])
    assert forms["plain"] and forms["shared"]  # both device-plugin settings occur
    parsed = parse_file(Source.kubernetes, wide.path("kubernetes/pods.watch.jsonl"), "sim")
    replicas = [
        e.data
        for e in parsed.events
        if isinstance(e, ev.AllocationEvent) and e.data.node and any("::" in d for d in e.data.device_ids)
    ]
    assert replicas and all(d.gpu_equivalents == pytest.approx(0.25) for d in replicas)


def test_a_gpu_with_xid_79_falls_off_the_bus_until_its_repair(small: SimulationResult) -> None:
    result = load(small, "dcgm/query_range.json")["data"]["result"]
    for xid in small.truth["xid_intervals"]:
        lo = datetime.fromisoformat(xid["from"].replace("Z", "+00:00")).timestamp()
        hi = datetime.fromisoformat(xid["to"].replace("Z", "+00:00")).timestamp()
        times = sorted({t for s in result if s["metric"].get("UUID") == xid["gpu"] for t, _ in s["values"]})
        inside = [t for t in times if lo <= t < hi]
        assert inside == [lo]  # the scrape that saw XID 79 is its last until the repair
        assert any(t >= hi for t in times) or hi >= max(times, default=hi)  # back after the repair
    assert small.truth["xid_intervals"]


def test_the_inference_servers_token_counters_read_back_as_the_truth_per_model(wide: SimulationResult) -> None:
    """What ``ingest outputs`` reads from the vLLM counters is, per model, what the truth says the
    servers produced (the truth sums each server's counter, the parser the increases it saw)."""
    from collections import defaultdict

    from pipelines.parsers import outputs

    result = outputs.parse((wide.out_dir / "outputs/vllm_query_range.json").read_bytes(), cluster="c1")
    assert result.dead_letters == [] and result.events
    models = {(a["scheduler"], a["job_id"]): a["model"] for a in wide.truth["attempts"]}
    got: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for e in result.events:  # the pod (namespace/name) or the Slurm job, as the facts name them
        got[models[(e.data.scheduler, e.data.job_id)]][e.data.unit] += e.data.quantity
    truth = wide.truth["outputs_by_model"]
    assert truth and {m: dict(v) for m, v in got.items()} == truth
    assert all(v["tokens_prompt"] == 3 * v["tokens_generated"] > 0 for v in truth.values())


# --- idle causes -----------------------------------------------------------------------------------
@pytest.mark.parametrize("group", ["team", "model", "node"])
def test_idle_causes_split_exactly_the_idle_time(wide: SimulationResult, group: str) -> None:
    """The causes of every owner add up to its allocated − busy − unobserved GPU-seconds."""
    causes = wide.truth["idle_causes"][group]
    assert causes
    for key, parts in causes.items():
        row = rows(wide.truth, group)[key]
        idle = row["allocated_gpu_seconds"] - row["busy_gpu_seconds"] - row["unobserved_gpu_seconds"]
        assert sum(v for c, v in parts.items() if c != "unobserved") == pytest.approx(idle, abs=1e-6), key
        assert parts["unobserved"] == pytest.approx(row["unobserved_gpu_seconds"], abs=1e-6), key
        assert all(v >= 0 for c, v in parts.items() if c != "idle"), key


def test_every_planted_cause_comes_out(wide: SimulationResult) -> None:
    """The stall, the degraded fabric, checkpoints and slow starts each leave idle time of their own
    cause, where the simulator put them."""
    truth = wide.truth
    by_node = truth["idle_causes"]["node"]
    stall = truth["storage_stall"]
    seconds = (datetime.fromisoformat(stall["to"]) - datetime.fromisoformat(stall["from"])).total_seconds()
    gpus = sum(1 for g in truth["gpus"].values() if g["node"] == stall["node"])
    # every GPU on the node was starved (a tenth of its work) for the whole stall, if held
    assert by_node[stall["node"]]["storage_stall"] > 0.5 * 0.9 * seconds
    assert by_node[stall["node"]]["storage_stall"] <= gpus * seconds + 1e-6
    degraded = truth["degraded_node"]
    tested_with_it = {n for r in truth["acceptance_runs"] if degraded in r["nodes"] for n in r["nodes"]}
    assert by_node[degraded]["fabric_degraded"] > 0
    assert all(v["fabric_degraded"] == 0 for n, v in by_node.items() if n not in tested_with_it)
    totals = {c: sum(v[c] for v in by_node.values()) for c in ("checkpoint", "startup")}
    assert truth["slow_starts"] > 0 and totals["startup"] > 60 * truth["slow_starts"]
    assert totals["checkpoint"] > 0


def test_cost_truth_conserves_the_cluster_cost(wide: SimulationResult) -> None:
    """The models' costs add up to every GPU's seconds at its rate plus the shared costs of the day
    (from 00:00, when the price version starts, to midnight), whoever used them."""
    from pipelines.simulator.writers.reference import GPU_HOURLY, MONTHLY

    truth = wide.truth
    gpus = sum(float(GPU_HOURLY[g["gpu_model"]]) for g in truth["gpus"].values())
    hours = truth["hours"]
    shared = sum(MONTHLY.values()) * 1 / 30  # a whole November day: the prices start on its first hour
    assert sum(truth["cost_by_model"].values()) == pytest.approx(gpus * hours + shared, rel=1e-12)
    per_million = truth["cost_per_million_tokens"]
    assert per_million and set(per_million) <= set(truth["outputs_by_model"])
    for model, value in per_million.items():
        made = truth["outputs_by_model"][model]
        assert value == pytest.approx(
            truth["cost_by_model"][model] / (made["tokens_generated"] + made["tokens_prompt"]) * 1e6
        )
