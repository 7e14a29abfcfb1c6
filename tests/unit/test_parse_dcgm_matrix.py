"""The columnar paths (query_range answers, exposition text) give exactly what the record-by-record
paths give, on any input."""

from __future__ import annotations

import re
import sys
import threading
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.load import Load
from bench.sources import SELECTED, query_range_answer
from bench.sources import exposition as bench_exposition
from pipelines import wire
from pipelines.gpu_columns import GpuColumnsEvent, per_scrape
from pipelines.parsers import dcgm, dcgm_matrix, dcgm_scan, dcgm_text
from pipelines.parsers.base import ParseResult
from pipelines.times import time_hint

T0 = 1_762_077_600
VALUES = [
    "0.5",
    "1",
    "0",
    "50",
    "79",
    "NaN",
    "+Inf",
    "-1",
    "1.5",
    "1e3",
    "9223372036854775794",
    "2147483647",
    "140737488355328",
    "100",
    "41.5",
    "79.5",
    "70000",
]
METRICS = [
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "DCGM_FI_DEV_SM_CLOCK",
    "up",
]


def outcome(result: ParseResult) -> tuple[list[bytes], list[tuple[str, str]]]:
    """The scrapes (a version 3 message as the version 2 scrapes it carries) and the dead letters."""
    return [e.to_bytes() for e in scrapes(result)], sorted((d.reason, d.raw) for d in result.dead_letters)


def scrapes(result: ParseResult) -> list[Any]:
    """The events one scrape each, by node and time (the order of a node's messages means nothing)."""
    return sorted(per_scrape(result.events), key=lambda e: (e.cluster, e.data.node, e.time))


CLEAN = ["1", "0", "NaN", "9223372036854775794"]  # within range of every field


@st.composite
def answers(draw: st.DrawFn, values: list[str] = VALUES) -> dict[str, Any]:
    series = []
    for _ in range(draw(st.integers(1, 8))):
        gpu = draw(st.integers(0, 2))
        labels = {
            "__name__": draw(st.sampled_from(METRICS)),
            "gpu": str(gpu),
            "UUID": f"GPU-{gpu}",
            draw(st.sampled_from(["Hostname", "hostname", "instance"])): draw(st.sampled_from(["n1", "n2:9400"])),
            "modelName": "NVIDIA H100 80GB HBM3",
        }
        if draw(st.booleans()):
            labels.update(
                GPU_I_ID=draw(st.sampled_from(["1", "2", "x"])),
                GPU_I_PROFILE=draw(st.sampled_from(["1g.10gb", "3g.40gb", "9g.1gb"])),
            )
        if draw(st.booleans()):
            labels.update(namespace="ml", pod=draw(st.sampled_from(["a", "b"])))
        times = draw(st.lists(st.sampled_from([T0, T0 + 30, T0 + 60, T0 + 90.5]), min_size=1, max_size=4))
        points: list[Any] = [[t, draw(st.sampled_from(values))] for t in times]
        if values is VALUES and draw(st.integers(0, 9)) == 0:
            points.append(draw(st.sampled_from([[T0, 5], [True, "1"], [T0], "x", [T0, "1_0"], [1e300, "1"]])))
        series.append({"metric": labels, "values": points})
    return {"status": "success", "data": {"resultType": "matrix", "result": series}}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer=answers() | answers(CLEAN), hint=st.sampled_from([None, "n9"]), interval=st.sampled_from([None, 30.0]))
def test_columnar_path_equals_record_path(answer: dict[str, Any], hint: str | None, interval: float | None) -> None:
    def parse(raw: object) -> ParseResult | str:
        try:
            return dcgm.parse_query_range(raw, cluster="c1", node=hint, interval_s=interval, origin="t")
        except dcgm.NotThisFormat as exc:
            return str(exc)

    fast, slow = parse(orjson.dumps(answer)), parse(answer)  # decoded objects always go record by record
    if isinstance(slow, str) or isinstance(fast, str):
        assert fast == slow
        return
    assert outcome(fast) == outcome(slow)
    assert [e.data.gpus for e in scrapes(fast)] == [e.data.gpus for e in scrapes(slow)]
    assert fast.notes == slow.notes


def test_clean_answers_mostly_take_the_columnar_path() -> None:
    taken = 0
    for seed in range(60):
        taken += (
            dcgm_matrix.read(
                orjson.dumps(_clean(seed)),
                cluster="c1",
                node=None,
                interval_s=None,
                fields=dcgm.FIELDS,
                describe=dcgm._series,
                blank=dcgm._is_blank,
            )
            is not None
        )
    assert taken == 60


def _clean(seed: int) -> dict[str, Any]:
    """Several nodes, GPUs and MIG instances, each described by one label set."""
    series: list[dict[str, Any]] = []
    for node in range(1 + seed % 3):
        for gpu in range(1 + seed % 4):
            for gi in [None] if (seed + gpu) % 2 else ["1", "2"]:
                labels: dict[str, str] = {"gpu": str(gpu), "UUID": f"GPU-{gpu}", "Hostname": f"n{node}"}
                if gi:
                    labels.update(GPU_I_ID=gi, GPU_I_PROFILE="3g.40gb")
                for i, metric in enumerate(METRICS[: 2 + seed % 6]):
                    values = [[T0 + 30 * k, CLEAN[(seed + k + i) % len(CLEAN)]] for k in range(1 + (gpu + i) % 3)]
                    series.append({"metric": {"__name__": metric, **labels}, "values": values})
    return {"status": "success", "data": {"resultType": "matrix", "result": series}}


@given(seed=st.integers(0, 10_000))
@settings(max_examples=100, deadline=None)
def test_clean_multi_node_mig_answers_are_equal_both_ways(seed: int) -> None:
    answer = _clean(seed)
    fast = dcgm.parse_query_range(orjson.dumps(answer), cluster="c1")
    slow = dcgm.parse_query_range(answer, cluster="c1")
    assert outcome(fast) == outcome(slow) and fast.events


def test_a_clean_answer_takes_the_columnar_path() -> None:
    body = query_range_answer(Load(2, 30, node_prefix="m"), 4)
    fast = dcgm_matrix.read(
        body, cluster="c1", node=None, interval_s=None, fields=dcgm.FIELDS, describe=dcgm._series, blank=dcgm._is_blank
    )
    assert fast is not None and len(fast.events) == 2 and not fast.dead_letters  # one message per node
    assert all(isinstance(e, GpuColumnsEvent) and e.schema_version == 3 and e.data.n == 32 for e in fast.events)
    assert len(scrapes(fast)) == 8 and all(e.data.n == 8 for e in scrapes(fast))
    slow = dcgm.parse_query_range(orjson.loads(body), cluster="c1")
    assert outcome(fast) == outcome(slow)
    assert fast.events[0].data.interval_s == 30.0


def test_a_node_s_scrapes_go_out_up_to_256_rows_a_message_and_one_scrape_alone_as_version_2() -> None:
    assert dcgm_matrix.SCRAPE_ROWS == 256  # 32 scrapes of an 8-GPU node
    fast = dcgm.parse_query_range(query_range_answer(Load(1, 30, node_prefix="m"), 97), cluster="c1")
    assert [(e.schema_version, e.data.n) for e in fast.events] == [(3, 256), (3, 256), (3, 256), (2, 8)]
    back = [wire.decode(e.to_bytes()) for e in fast.events]
    assert [orjson.loads(e.to_bytes()) for e in back] == [orjson.loads(e.to_bytes()) for e in fast.events]
    times = [e.time for e in scrapes(fast)]
    assert len(times) == len(set(times)) == 97 and [e.time for e in fast.events] == [
        times[0],
        times[32],
        times[64],
        times[96],
    ]
    assert fast.events[0].last_time == times[31]
    slow = dcgm.parse_query_range(orjson.loads(query_range_answer(Load(1, 30, node_prefix="m"), 97)), cluster="c1")
    assert outcome(fast) == outcome(slow) and len(slow.events) == 97


def exposition(answer: dict[str, Any], stamped: bool, spoiler: str) -> str:
    lines = ["# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).", "# TYPE DCGM_FI_DEV_GPU_TEMP gauge"]
    for series in answer["data"]["result"]:
        metric = dict(series["metric"])
        name = metric.pop("__name__")
        labels = ",".join(f'{k}="{v}"' for k, v in metric.items())
        for point in series["values"]:
            if isinstance(point, list) and len(point) == 2 and isinstance(point[1], str):
                stamp = f" {int(point[0] * 1000)}" if stamped and not isinstance(point[0], bool) else ""
                lines.append(f"{name}{{{labels}}} {point[1]}{stamp}")
    return "\n".join([*lines, spoiler]) + "\n"


SPOILERS = [
    "",
    "",
    "",
    "# a comment",
    'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-0",Hostname="n1"}  41',
    'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-0",Hostname="n\\"1"} 41',
    "garbage line",
    "  ",
    'DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-1",hostname="n2"} 12 1762077600000',
    'DCGM_FI_DEV_SM_CLOCK{gpu="0",gpu="0"} 1980',
]


def slow_exposition(text: str, **kw: Any) -> ParseResult:
    """parse_exposition's line-by-line branch, called directly."""
    reading = dcgm.prom.read_exposition(text, wanted=dcgm.FIELDS)
    result = dcgm._build(
        reading,
        cluster="c1",
        default_time=time_hint(kw["scrape_time"]),
        node=kw["node"],
        interval_s=kw["interval_s"],
        origin="t",
    )
    if not reading.samples and not reading.bad:
        dcgm._note_unread(result, dcgm._DCGM_NAME.findall(text))
    return result


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    answer=answers() | answers(CLEAN),
    stamped=st.booleans(),
    spoiler=st.sampled_from(SPOILERS),
    scrape=st.sampled_from([None, T0 + 5]),
    hint=st.sampled_from([None, "n9"]),
)
def test_columnar_exposition_equals_the_line_reader(
    answer: dict[str, Any], stamped: bool, spoiler: str, scrape: float | None, hint: str | None
) -> None:
    text = exposition(answer, stamped, spoiler)
    kw: dict[str, Any] = {"scrape_time": scrape, "node": hint, "interval_s": None}
    try:
        fast = dcgm.parse_exposition(text, cluster="c1", origin="t", **kw)
    except dcgm.NotThisFormat:
        return  # decided before either reader runs
    slow = slow_exposition(text, **kw)
    assert outcome(fast) == outcome(slow)
    assert fast.notes == slow.notes


def test_a_plain_scrape_takes_the_columnar_path() -> None:
    text = bench_exposition(Load(2, 30, node_prefix="m"), 1, 3).decode()  # dcgm-exporter's default counters
    when = time_hint(T0)
    fast = dcgm_text.read(
        text,
        cluster="c1",
        scrape_time=when,
        node=None,
        interval_s=None,
        fields=dcgm.FIELDS,
        describe=dcgm._series,
        blank=dcgm._is_blank,
        convert=dcgm.convert,
    )
    assert fast is not None and len(fast.events) == 1 and fast.events[0].data.n == 8
    slow = slow_exposition(text, scrape_time=T0, node=None, interval_s=None)
    assert outcome(fast) == outcome(slow) and outcome(
        dcgm.parse_exposition(text, cluster="c1", scrape_time=T0)
    ) == outcome(slow)


def test_one_bad_record_sends_only_its_node_record_by_record(monkeypatch: pytest.MonkeyPatch) -> None:
    answer = orjson.loads(query_range_answer(Load(4, 30, node_prefix="m"), 6))
    bad = next(s for s in answer["data"]["result"] if s["metric"].get("Hostname", "").endswith("2"))
    bad["values"][1][1] = "not a number"
    read: list[set[str]] = []
    record_path = dcgm._build

    def spy(reading: Any, **kw: Any) -> ParseResult:
        read.append({s.labels.get("Hostname", "") for s in reading.samples})
        return record_path(reading, **kw)

    monkeypatch.setattr(dcgm, "_build", spy)
    mixed = dcgm.parse_query_range(orjson.dumps(answer), cluster="c1")
    assert read == [{bad["metric"]["Hostname"]}]  # the three clean nodes took the columnar path
    whole = dcgm.parse_query_range(answer, cluster="c1")  # a decoded answer: all of it record by record
    assert outcome(mixed) == outcome(whole) and len(mixed.dead_letters) == 1
    assert [e.data.gpus for e in scrapes(mixed)] == [e.data.gpus for e in scrapes(whole)]


@given(
    st.lists(
        st.one_of(
            st.sampled_from(["", "1", "0.5", ".5", "5.", "1e9", "1E+09", "-2.5e-3", "+Inf", "-Inf", "NaN", "nan"]),
            st.sampled_from(["inf", "1e", ".", "1.2.3", "1_0", " 1", "0x10", "--1", "Infinity", "1\n", "1\n2", "\n"]),
            st.text(alphabet="0123456789.eE+-nNaIf", max_size=6),
        ),
        max_size=8,
    )
)
def test_the_joined_check_of_values_is_the_check_of_each(values: list[str]) -> None:
    """``floats`` checks a list in one match; it says what checking each value on its own says (an empty
    value anywhere, the last one included, is not a float)."""
    one = re.compile(dcgm_matrix.VALUE)
    assert dcgm_matrix.floats(values) == all(one.fullmatch(v) for v in values)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer=answers() | answers(CLEAN))
def test_the_scan_reads_the_points_orjson_reads(answer: dict[str, Any]) -> None:
    """Where the byte scan takes an answer, its series, times and values are those of decoding it
    whole; it declines any answer with a point it cannot read exactly (then orjson decodes it)."""
    body = orjson.dumps(answer)
    scanned = dcgm_scan.scan(body)
    points = [s["values"] for s in answer["data"]["result"]]
    exact = all(
        isinstance(p, list)
        and len(p) == 2
        and type(p[0]) in (int, float)
        and isinstance(p[1], str)
        and re.fullmatch(dcgm_matrix.VALUE, p[1])
        and p[1].lower() not in ("nan", "+inf", "-inf", "inf")
        and -62135596800 <= p[0] <= 253402300799
        for series in points
        for p in series
    ) and all(points)
    assert (scanned is not None) == exact
    if scanned is not None:
        series, times, values = scanned
        assert [s["metric"] for s in series] == [s["metric"] for s in answer["data"]["result"]]
        assert [t.tolist() for t in times] == [[float(p[0]) for p in s] for s in points]
        assert [v.tolist() for v in values] == [[float(p[1]) for p in s] for s in points]


def test_a_prometheus_answer_takes_the_scan() -> None:
    body = query_range_answer(Load(3, 30, node_prefix="m"), 5)
    scanned = dcgm_scan.scan(body)
    assert scanned is not None and len(scanned[0]) == 3 * 8 * len(SELECTED)
    assert all(len(t) == 5 for t in scanned[1])


GOOD = (
    b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL",'
    b'"gpu":"0","UUID":"GPU-0","Hostname":"n1"},"values":[[1762077600,"5"],[1762077630.5,"7.25"]]}]}}'
)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (b"[1762077600,", b"[+1762077600,"),  # JSON numbers have no plus sign
        (b"[1762077600,", b"[.5,"),
        (b"[1762077600,", b"[-.5,"),
        (b"[1762077600,", b"[01762077600,"),  # nor a leading zero
        (b"[1762077600,", b"[1762077600.,"),
        (b"[1762077600,", b"[1.e9,"),
        (b"[1762077600,", b"[1762077600 ,"),
        (b"[1762077600,", b'["1762077600",'),
        (b'"5"]', b'"NaN"]'),  # read by the whole decode (missing value), not by the scan
        (b'"5"]', b'"+Inf"]'),
        (b'"5"]', b'"Infinity"]'),
        (b'"5"]', b'""]'),
        (b'"5"]', b"5]"),
        (b'"5"]', b'"5","6"]'),
        (b'"values":[[', b'"values":[ ['),
        (b'"values":[[1762077600,"5"],[1762077630.5,"7.25"]]', b'"values":[]'),
        (b'"values":[[1762077600,"5"],[1762077630.5,"7.25"]]', b'"values":[[1762077600,"5"]],"more":1'),
        (b'"Hostname":"n1"', b'"Hostname":"n1\\",\\"values\\":[[1,\\"2\\"]]'),
        (b'"matrix"', b'"vector"'),
    ],
)
def test_the_scan_declines_what_it_cannot_read_exactly(old: bytes, new: bytes) -> None:
    assert dcgm_scan.scan(GOOD) is not None
    body = GOOD.replace(old, new, 1)
    assert body != GOOD
    assert dcgm_scan.scan(body) is None
    try:
        decoded: object = orjson.loads(body)
    except orjson.JSONDecodeError:
        return
    assert outcome(dcgm.parse_query_range(body, cluster="c1")) == outcome(dcgm.parse_query_range(decoded, cluster="c1"))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (b"", b""),  # taken
        (b'"matrix"', b'"vector"'),  # the labels fail after the reader started
        (b"1762077630.5", b"+1762077630.5"),  # the text checks fail after the reader started
        (b'"7.25"', b'"7.2x"'),  # Arrow fails
    ],
)
def test_the_scan_waits_for_its_reader_thread_on_every_path(old: bytes, new: bytes) -> None:
    body = GOOD.replace(old, new, 1) if old else GOOD
    assert (dcgm_scan.scan(body) is not None) == (not old)
    assert not any(t.name == "dcgm-scan-points" for t in threading.enumerate())


def test_without_pyarrow_the_answer_is_decoded_whole_with_the_same_events(monkeypatch: pytest.MonkeyPatch) -> None:
    """A collector-only install has no pyarrow: the scan declines and orjson reads the answer."""
    body = query_range_answer(Load(2, 30, node_prefix="m"), 4)
    with_scan = dcgm.parse_query_range(body, cluster="c1")
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now raises ImportError
    assert dcgm_scan.scan(body) is None
    without = dcgm.parse_query_range(body, cluster="c1")
    assert outcome(without) == outcome(with_scan) and len(scrapes(without)) == 8
