"""dcgm-exporter parser: exposition (3.x/4.x, MIG, Kubernetes, Slurm, blanks) and Prometheus answers.

Expected values come from the fixtures' own numbers and the documented DCGM semantics
(PROF_* ratios, GPU_UTIL percent, blank sentinels), not from the parser's output.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pipelines.events import GpuMetricsEvent, GpuSample, event_id, mig_fraction
from pipelines.gpu_columns import per_scrape
from pipelines.parsers import dcgm, prom
from pipelines.parsers.base import NotThisFormat

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm"
SCRAPE = datetime(2025, 11, 2, 10, 0, tzinfo=UTC)
U0 = "GPU-5a7e3c1b-2f4d-8e9a-0b1c-3d5e7f9a1b2c"
U1 = "GPU-8c2d4e6f-1a3b-5c7d-9e0f-2a4b6c8d0e1f"
U2 = "GPU-1f3e5d7c-9b0a-2c4e-6f8a-0b2d4f6a8c0e"


def run(name: str, **hints: object) -> tuple[list[GpuMetricsEvent], list[str]]:
    hints.setdefault("scrape_time", SCRAPE)
    result = dcgm.parse((FIX / name).read_bytes(), cluster="c1", origin=name, **hints)
    events = per_scrape(result.events)  # a body of several scrapes is one version 3 message per node
    assert all(isinstance(e, GpuMetricsEvent) for e in events)
    return events, [d.reason for d in result.dead_letters]  # type: ignore[return-value]


def by_slot(event: GpuMetricsEvent) -> dict[str, GpuSample]:
    return {g.slot: g for g in event.data.gpus}


@pytest.mark.parametrize(
    ("name", "node", "times", "gpus_per_event", "interval", "dead"),
    [
        ("exporter_3x_hostname.prom", "gpu-h100-01", [SCRAPE], 2, None, 0),
        (
            "exporter_4x_timestamps.prom",
            "gpu-h200-07",
            [SCRAPE, datetime(2025, 11, 2, 10, 0, 30, tzinfo=UTC)],
            2,
            30.0,
            0,
        ),
        ("mig_node.prom", "gpu-mig-01", [SCRAPE], 6, None, 0),  # 1 parent + 4 instances + 1 whole GPU
        ("k8s_mapped.prom", "gpu-h100-02", [SCRAPE], 4, None, 0),
        ("slurm_mapped.prom", "node0042", [SCRAPE], 4, None, 0),
        ("blanks_and_bad.prom", "gpu-h100-03", [SCRAPE], 2, None, 4),
    ],
)
def test_fixture_shapes(
    name: str, node: str, times: list[datetime], gpus_per_event: int, interval: float | None, dead: int
) -> None:
    events, reasons = run(name)
    assert [e.time for e in events] == times
    assert {e.data.node for e in events} == {node}
    assert all(len(e.data.gpus) == gpus_per_event for e in events)
    assert {e.data.interval_s for e in events} == {interval}
    assert len(reasons) == dead
    for e in events:
        assert e.id == event_id("gpu.sample", "c1", node, e.time)
        assert (e.source, e.type, e.cluster) == ("dcgm", "gpu.sample", "c1")


def test_3x_values_are_converted_by_unit() -> None:
    (event,), _ = run("exporter_3x_hostname.prom")
    busy = by_slot(event)[U0]
    assert busy.index == 0 and busy.model == "NVIDIA H100 80GB HBM3"
    assert busy.gr_engine_active == pytest.approx(0.873541)
    assert busy.gpu_util == pytest.approx(0.91)  # 91 % in the exposition
    ratios = (busy.sm_active, busy.tensor_active, busy.dram_active)
    assert ratios == pytest.approx((0.801234, 0.412, 0.350125))
    assert (busy.fb_used_mib, busy.fb_free_mib) == (61234, 20269)
    assert busy.power_w == pytest.approx(612.458)
    assert busy.energy_mj == 987654321012
    assert (busy.temperature_c, busy.xid) == (63, 0)
    assert busy.utilization == pytest.approx(0.873541)  # GR engine preferred over GPU util
    idle = by_slot(event)[U1]
    assert idle.gr_engine_active == 0 and idle.gpu_util == 0 and idle.fb_used_mib == 0


def test_4x_timestamps_win_over_scrape_time_and_xid_is_read() -> None:
    events, _ = run("exporter_4x_timestamps.prom", scrape_time=datetime(2030, 1, 1, tzinfo=UTC))
    assert [e.time.year for e in events] == [2025, 2025]
    first, second = (by_slot(e)[U1] for e in events)
    assert first.xid == 0 and second.xid == 79
    assert first.gpu_util == pytest.approx(0.47) and second.gr_engine_active == 0


def test_mig_instances_and_parent() -> None:
    (event,), _ = run("mig_node.prom")
    slots = by_slot(event)
    instances = [g for g in event.data.gpus if g.mig_instance is not None]
    assert sorted(g.mig_instance or 0 for g in instances) == [2, 3, 9, 10]
    assert {g.uuid for g in instances} == {U0}  # the parent's UUID
    assert sum(mig_fraction(g.mig_profile) for g in instances) == pytest.approx(1.0)  # 3+2+1+1 of 7
    assert all(g.gpu_util is None for g in instances)  # GPU_UTIL is absent on MIG instances
    assert slots[f"{U0}/mig2"].mig_profile == "3g.40gb"
    assert slots[f"{U0}/mig2"].gr_engine_active == pytest.approx(0.612345)
    assert slots[f"{U0}/mig10"].fb_used_mib == 9500
    parent = slots[U0]
    assert parent.mig_profile is None and parent.temperature_c == 52
    assert parent.power_w == pytest.approx(233.17)
    assert parent.gr_engine_active is None
    assert slots[U1].gpu_util == pytest.approx(0.35)


@pytest.mark.parametrize(
    ("index", "namespace", "pod", "container"),
    [
        (0, "team-nlp", "llm-pretrain-worker-0", "trainer"),
        (1, "team-nlp", "llm-pretrain-worker-0", "trainer"),
        (2, "team-vision", "resnet-finetune-7d9f8-x2kq", "pytorch"),
        (3, None, None, None),
    ],
)
def test_kubernetes_mapping(index: int, namespace: str | None, pod: str | None, container: str | None) -> None:
    (event,), _ = run("k8s_mapped.prom")
    gpu = next(g for g in event.data.gpus if g.index == index)
    assert (gpu.namespace, gpu.pod, gpu.container) == (namespace, pod, container)
    assert gpu.hpc_job is None


@pytest.mark.parametrize(("index", "job"), [(0, "4815162"), (1, "4815162"), (2, "4815170"), (3, None)])
def test_slurm_mapping(index: int, job: str | None) -> None:
    (event,), _ = run("slurm_mapped.prom")
    gpu = next(g for g in event.data.gpus if g.index == index)
    assert gpu.hpc_job == job and gpu.pod is None


def test_blanks_are_missing_and_bad_values_are_dead_letters() -> None:
    (event,), reasons = run("blanks_and_bad.prom")
    g0, g1 = by_slot(event)[U0], by_slot(event)[U1]
    # blanks: FB_USED int64 blank, POWER fp64 blank, TEMP int32 blank, ENERGY int64 NOT_SUPPORTED, UTIL NaN
    assert (g0.fb_used_mib, g0.power_w, g0.temperature_c, g0.energy_mj, g0.gpu_util) == (None,) * 5
    assert g0.gr_engine_active is None  # 1.7 is out of range: dropped, the rest of the GPU kept
    assert g0.sm_active == pytest.approx(0.5) and g0.fb_free_mib == 81559
    assert g1.power_w is None and g1.xid is None and g1.gpu_util == pytest.approx(0.5)
    assert sorted(r.split(":")[0] for r in reasons) == [
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "line 54",
    ]
    assert any("without UUID" in r for r in reasons)
    assert any("1.7" in r for r in reasons) and any("negative" in r for r in reasons)
    assert all(r and "\n" not in r for r in reasons)


def test_query_range_merges_one_gpu_across_label_sets() -> None:
    events, reasons = run("query_range_two_labelsets.json")
    assert reasons == []
    t0 = datetime(2025, 11, 2, 11, 0, tzinfo=UTC)
    assert [(e.time - t0).total_seconds() for e in events] == [0, 30, 60, 90, 120, 150]
    assert {e.data.node for e in events} == {"gpu017"}  # Hostname before the upgrade, hostname after
    assert {e.data.interval_s for e in events} == {30.0}  # the query step
    gpus = [e.data.gpus for e in events]
    assert all(len(g) == 1 and g[0].uuid == U2 for g in gpus)
    assert [g[0].pod for g in gpus] == [None, None] + ["vllm-7b-6c9d5f-abcde"] * 4
    assert [g[0].gr_engine_active for g in gpus] == pytest.approx([0, 0, 0.41, 0.44, 0.52, 0.5])
    assert [g[0].fb_used_mib for g in gpus] == [0, 0, 40960, 40960, 41000, 41000]
    assert [g[0].gpu_util for g in gpus] == [None, None, pytest.approx(0.45), pytest.approx(0.47), None, None]


def test_query_range_interval_hint_and_determinism() -> None:
    raw = (FIX / "query_range_two_labelsets.json").read_text()
    a = dcgm.parse_query_range(raw, cluster="c1", interval_s=15)
    b = dcgm.parse_query_range(json.loads(raw), cluster="c1", interval_s=15)
    assert {e.data.interval_s for e in a.events} == {15.0}
    assert [e.id for e in a.events] == [e.id for e in b.events]
    assert len({e.id for e in a.events}) == 6


def _series(name: str, labels: dict[str, str], value: str, t: float = 1762077600) -> dict[str, object]:
    return {"metric": {"__name__": name, **labels}, "value": [t, value]}


BASE = {"gpu": "0", "UUID": U0, "Hostname": "gpu001"}


def test_vector_answer_and_bare_result_list() -> None:
    result = [_series("DCGM_FI_DEV_GPU_UTIL", BASE, "55"), _series("DCGM_FI_DEV_GPU_TEMP", BASE, "40")]
    full = {"status": "success", "data": {"resultType": "vector", "result": result}}
    for answer in (full, result, json.dumps(full).encode()):
        (event,) = dcgm.parse_query_range(answer, cluster="c1").events
        (gpu,) = event.data.gpus
        assert gpu.gpu_util == pytest.approx(0.55) and gpu.temperature_c == 40
        assert event.time == datetime(2025, 11, 2, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "answer",
    [
        {"status": "error", "errorType": "bad_data", "error": "parse error"},
        {"status": "success", "data": {"resultType": "scalar", "result": [1, "1"]}},
        {
            "status": "success",
            "data": {"resultType": "vector", "result": [_series("node_disk_read_bytes_total", {"device": "sda"}, "1")]},
        },
        [{"not": "a series"}],
        "just text",
        "",
    ],
)
def test_not_dcgm_input(answer: object) -> None:
    data = answer if isinstance(answer, str) else json.dumps(answer)
    with pytest.raises(NotThisFormat) as err:
        dcgm.parse(data, cluster="c1", scrape_time=SCRAPE)
    assert str(err.value) and "\n" not in str(err.value)


def test_truncated_answer_and_empty_result() -> None:
    text = (FIX / "query_range_two_labelsets.json").read_text()
    truncated = dcgm.parse(text[: len(text) // 2], cluster="c1")
    assert truncated.events == [] and len(truncated.dead_letters) == 1
    assert "invalid JSON" in truncated.dead_letters[0].reason
    empty = dcgm.parse('{"status":"success","data":{"resultType":"matrix","result":[]}}', cluster="c1")
    assert empty.events == [] and empty.dead_letters == []


@pytest.mark.parametrize(
    ("labels", "hint", "node"),
    [
        ({"Hostname": "a1"}, None, "a1"),
        ({"hostname": "a2"}, None, "a2"),
        ({"Hostname": "a3", "instance": "10.0.0.9:9400"}, "hint", "a3"),
        ({"instance": "10.0.0.7:9400"}, None, "10.0.0.7"),
        ({"instance": "[fd00::7]:9400"}, None, "fd00::7"),
        ({"instance": "gpu009"}, None, "gpu009"),
        ({}, "from-hint", "from-hint"),
        ({}, None, None),
    ],
)
def test_node_resolution(labels: dict[str, str], hint: str | None, node: str | None) -> None:
    series = [_series("DCGM_FI_DEV_GPU_TEMP", {"gpu": "0", "UUID": U0, **labels}, "40")]
    result = dcgm.parse_query_range(series, cluster="c1", node=hint)
    assert [e.data.node for e in result.events] == ([node] if node else [])
    assert len(result.dead_letters) == (0 if node else 1)


TARGET = {"namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-x7k2p", "container": "nvidia-dcgm-exporter"}


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"pod_namespace": "ns-old", "pod_name": "p-old", "container_name": "c-old"}, ("ns-old", "p-old", "c-old")),
        ({"namespace": "", "pod": "", "container": ""}, (None, None, None)),
        (
            {"exported_namespace": "team-a", "exported_pod": "train-0", "exported_container": "main", **TARGET},
            ("team-a", "train-0", "main"),
        ),
        (TARGET, (None, None, None)),  # no workload: Prometheus attached the scrape target's own labels
    ],
)
def test_kubernetes_label_variants(labels: dict[str, str], expected: tuple[str | None, ...]) -> None:
    (event,) = dcgm.parse_query_range([_series("DCGM_FI_DEV_GPU_TEMP", {**BASE, **labels}, "40")], cluster="c1").events
    (gpu,) = event.data.gpus
    assert (gpu.namespace, gpu.pod, gpu.container) == expected


def test_exposition_without_timestamp_needs_scrape_time() -> None:
    text = (FIX / "exporter_3x_hostname.prom").read_text()
    result = dcgm.parse_exposition(text, cluster="c1")
    assert result.events == []
    assert result.dead_letters and all("--time" in d.reason for d in result.dead_letters)


def test_same_field_twice_first_wins_and_series_merge() -> None:
    text = (
        f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",UUID="{U0}",Hostname="n1"}} 40\n'
        f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",UUID="{U0}",hostname="n1",pod="p",namespace="ns",container="c"}} 60\n'
        f'DCGM_FI_DEV_GPU_TEMP{{gpu="0",UUID="{U0}",Hostname="n1"}} 41\n'
    )
    (event,) = dcgm.parse(text, cluster="c1", scrape_time="2025-11-02T10:00:00Z").events
    (gpu,) = event.data.gpus
    assert gpu.gpu_util == pytest.approx(0.4) and gpu.temperature_c == 41 and gpu.pod == "p"


@pytest.mark.parametrize(
    ("labels", "reason"),
    [
        ({"GPU_I_ID": "x1", "GPU_I_PROFILE": "1g.10gb"}, "GPU_I_ID"),
        ({"GPU_I_ID": "3", "GPU_I_PROFILE": "9g.90gb"}, "compute slices"),
    ],
)
def test_bad_mig_labels_are_dead_letters(labels: dict[str, str], reason: str) -> None:
    result = dcgm.parse_query_range([_series("DCGM_FI_DEV_FB_USED", {**BASE, **labels}, "1")], cluster="c1")
    assert result.events == [] and reason in result.dead_letters[0].reason


@pytest.mark.parametrize(
    ("kind", "value", "expected", "bad"),
    [
        ("ratio", 0.0, 0.0, False),
        ("ratio", 1.0, 1.0, False),
        ("ratio", 1.7, None, True),
        ("ratio", -0.2, None, True),
        ("ratio", float("nan"), None, False),
        ("ratio", float("inf"), None, True),
        ("percent", 100.0, 1.0, False),
        ("percent", 37.0, 0.37, False),
        ("percent", 101.0, None, True),
        ("nonneg", -5.0, None, True),
        ("nonneg", 140737488355328.0, None, False),
        ("nonneg", 2147483632.0, None, False),
        ("counter", 2147483632.0, 2147483632.0, False),
        ("counter", 9223372036854775792.0, None, False),
        ("counter", 140737488355329.0, None, False),
        ("temp", 250.0, None, True),
        ("temp", -10.0, -10.0, False),
        ("xid", 79.0, 79, False),
        ("xid", 79.5, None, True),
        ("xid", 9223372036854775794.0, None, False),
    ],
)
def test_convert(kind: str, value: float, expected: float | None, bad: bool) -> None:
    converted, reason = dcgm.convert(kind, value)
    assert converted == (pytest.approx(expected) if expected is not None else None)
    assert bool(reason) is bad


@pytest.mark.parametrize(
    ("line", "name", "labels", "value", "ms"),
    [
        ('m{a="x\\"y",b="c\\\\d",e="f\\ng"} 1.5e3', "m", {"a": 'x"y', "b": "c\\d", "e": "f\ng"}, 1500.0, None),
        ('m{a="1",} +Inf 1762077600000', "m", {"a": "1"}, float("inf"), 1762077600000),
        ("m_total 42", "m_total", {}, 42.0, None),
        ('m{a="},{"} -3 -1000', "m", {"a": "},{"}, -3.0, -1000),
    ],
)
def test_exposition_line_reader(line: str, name: str, labels: dict[str, str], value: float, ms: int | None) -> None:
    sample, reason = prom.parse_line(line)
    assert sample is not None, reason
    assert (sample.name, sample.labels, sample.value) == (name, labels, value)
    assert sample.time == (None if ms is None else datetime.fromtimestamp(ms / 1000, UTC))


@pytest.mark.parametrize(
    "line",
    [
        'm{a="1"}',
        "m{a=1} 2",
        'm{a="1",a="2"} 3',
        "m 1 2 3",
        "m one",
        '{a="1"} 1',
        'm{a="1" b="2"} 1',
        "m 1 99999999999999999",
    ],
)
def test_exposition_line_reader_rejects(line: str) -> None:
    sample, reason = prom.parse_line(line)
    assert sample is None and reason


# ------------------------------------------------------------------ public files (tests/unit/realworld.py)
def realworld_text(name: str) -> str:
    from tests.unit.realworld import realworld_file

    return realworld_file(name).read_text()


def test_hostname_that_is_the_exporter_pod_gives_way_to_the_node_hint() -> None:
    text = realworld_text("dcgm_rtx2000_a30mig_lowercase_hostname_pr736.prom")
    result = dcgm.parse(text, cluster="c1", time="2026-11-10T01:00:00Z", node="gpu-node-1")
    assert result.dead_letters == []
    (event,) = result.events
    assert event.data.node == "gpu-node-1" and len(event.data.gpus) == 4


def test_hostname_that_is_the_exporter_pod_without_a_better_name_is_a_dead_letter() -> None:
    text = realworld_text("dcgm_rtx2000_a30mig_lowercase_hostname_pr736.prom")
    result = dcgm.parse(text, cluster="c1", time="2026-11-10T01:00:00Z")
    assert result.events == [] and result.dead_letters
    assert all("dcgm-exporter-wwwjh" in d.reason and "--node" in d.reason for d in result.dead_letters)


@pytest.mark.parametrize(
    ("labels", "hint", "node"),
    [
        ({"hostname": "dcgm-exporter-wwwjh", "node": "gpu-7"}, "hint", "gpu-7"),
        ({"Hostname": "nvidia-dcgm-exporter-x7k2p", "kubernetes_node": "gpu-8"}, None, "gpu-8"),
        ({"Hostname": "exporter-1", "pod": "exporter-1", "node": "gpu-9"}, None, "gpu-9"),  # the target's own pod
        ({"hostname": "dcgm-exporter-wwwjh", "instance": "10.1.2.3:9400"}, "gpu-10", "gpu-10"),
        ({"hostname": "dcgm-exporter-wwwjh", "instance": "gpu-11:9400"}, None, "gpu-11"),
        ({"hostname": "dcgm-exporter-wwwjh", "instance": "nvidia-dcgm-exporter.svc:9400"}, None, None),
        ({"Hostname": "gpu-12", "node": "other"}, "hint", "gpu-12"),  # a real host name still wins
    ],
)
def test_node_resolution_around_exporter_pods(labels: dict[str, str], hint: str | None, node: str | None) -> None:
    series = [_series("DCGM_FI_DEV_GPU_TEMP", {"gpu": "0", "UUID": U0, **labels}, "40")]
    result = dcgm.parse_query_range(series, cluster="c1", node=hint)
    assert [e.data.node for e in result.events] == ([node] if node else [])
    assert [("--node" in d.reason) for d in result.dead_letters] == ([] if node else [True])


def test_series_without_any_host_name_the_node_flag() -> None:
    result = dcgm.parse_query_range([_series("DCGM_FI_DEV_GPU_TEMP", {"gpu": "0", "UUID": U0}, "40")], cluster="c1")
    assert [("--node" in d.reason) for d in result.dead_letters] == [True]


def test_a_shared_device_repeated_per_holder_is_one_sample_that_keeps_every_holder() -> None:
    dra = 'dra_claim_name="shared-gpu",dra_claim_namespace="team-a",dra_driver_name="gpu.nvidia.com"'
    lines = []
    for metric, value in (("DCGM_FI_DEV_GPU_UTIL", 40), ("DCGM_FI_DEV_GPU_TEMP", 41)):
        for ns, pod in (("team-a", "infer-0"), ("team-b", "infer-1"), ("team-a", "infer-0")):
            lines.append(
                f'{metric}{{gpu="0",UUID="{U0}",Hostname="n1",namespace="{ns}",pod="{pod}",container="c",'
                f"{dra}}} {value}"
            )
    result = dcgm.parse("\n".join(lines) + "\n", cluster="c1", time="2026-11-10T01:00:00Z")
    assert result.dead_letters == []
    (event,) = result.events
    (gpu,) = event.data.gpus
    assert gpu.gpu_util == pytest.approx(0.4) and gpu.temperature_c == 41
    assert (gpu.namespace, gpu.pod) == ("team-a", "infer-0")
    assert gpu.holders == ["team-a/infer-0", "team-b/infer-1"]


def test_a_device_with_one_holder_lists_no_holders() -> None:
    (event,) = dcgm.parse(realworld_text("dcgm_l40s_k8s_dcgm_issue226.prom"), cluster="c1", time=SCRAPE).events
    assert all(g.holders == [] for g in event.data.gpus)


def test_an_answer_without_any_metric_read_says_why() -> None:
    result = dcgm.parse(realworld_text("dcgm_prom_vector_t4_rafay_pcie.json"), cluster="c1")
    assert result.events == [] and result.dead_letters == []
    assert len(result.notes) == 1 and "DCGM_FI_DEV_PCIE_REPLAY_COUNTER" in result.notes[0]


def test_exposition_without_any_metric_read_says_why() -> None:
    text = f'DCGM_FI_DEV_SM_CLOCK{{gpu="0",UUID="{U0}",Hostname="n1"}} 1410\n'
    result = dcgm.parse(text, cluster="c1", time=SCRAPE)
    assert result.events == [] and result.dead_letters == []
    assert len(result.notes) == 1 and "DCGM_FI_DEV_SM_CLOCK" in result.notes[0]
