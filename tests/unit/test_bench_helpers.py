"""The benchmark's pure helpers: CPU time from /proc, CPU per GPU-sample, the live load's pods, the
collector inputs it generates, and the result rows. Performance itself is measured by the bench."""

from __future__ import annotations

import os
import socket
import time

import orjson
import pytest

from bench import cpu, live, prom_parser, sources
from bench.load import Load, messages
from bench.report import table_rows
from pipelines.parsers import dcgm
from pipelines.parsers.base import ParseResult

# /proc/<pid>/stat of a process whose name holds spaces and parentheses: utime 1234, stime 567
STAT = (
    "4242 (weird ) name (x)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 1234 567 0 0 20 0 3 0 "
    "100 200000000 5000 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0"
)
TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1FBB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0 100 0 0 10 0
   1: 0100007F:1FBB 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 222 1 0 20 4 30 10 -1
   2: 00000000:2384 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 333 1 0 100 0 0 10 0
"""


def test_stat_ticks_counts_fields_after_the_last_parenthesis() -> None:
    assert cpu.stat_ticks(STAT) == 1234 + 567
    assert cpu.stat_ticks("1 (a) R " + " ".join(str(i) for i in range(4, 53))) == 14 + 15


def test_cpu_seconds_of_this_process_agrees_with_os_times() -> None:
    deadline = time.process_time() + 0.05
    while time.process_time() < deadline:  # burn some CPU so both readings are well above zero
        pass
    times = os.times()
    measured = cpu.cpu_seconds(os.getpid())
    tick = 1 / os.sysconf("SC_CLK_TCK")
    assert measured >= 0.05 - tick
    assert abs(measured - (times.user + times.system)) <= 2 * tick


@pytest.mark.parametrize(
    ("cpu_s", "samples", "expected"), [(1.0, 1_000_000, 1.0), (0.5, 1000, 500.0), (0.0, 7, 0.0), (2.0, 3, 666_666.7)]
)
def test_per_sample_us(cpu_s: float, samples: int, expected: float) -> None:
    assert cpu.per_sample_us(cpu_s, samples) == expected


@pytest.mark.parametrize(("cpu_s", "samples"), [(1.0, 0), (1.0, -5), (-0.01, 10)])
def test_per_sample_us_refuses_what_has_no_meaning(cpu_s: float, samples: int) -> None:
    with pytest.raises(ValueError):
        cpu.per_sample_us(cpu_s, samples)


def test_listening_inodes_only_listening_sockets_on_the_port() -> None:
    assert cpu.listening_inodes(TCP, 8123) == {"111"}  # 0x1FBB; the established one (222) is not listening
    assert cpu.listening_inodes(TCP, 9092) == {"333"}
    assert cpu.listening_inodes(TCP, 8124) == set()


def test_listening_pid_finds_the_process_holding_the_socket() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert cpu.listening_pid(port) == os.getpid()
        assert cpu.endpoint_pid(f"http://127.0.0.1:{port}") == os.getpid()
    assert cpu.listening_pid(port) is None


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:8123", True),
        ("http://localhost:8123", True),
        ("http://[::1]:8123", True),
        ("https://clickhouse.example.com:8443", False),
        ("http://10.0.0.5:8123", False),
    ],
)
def test_only_a_loopback_endpoint_is_local(url: str, local: bool) -> None:
    assert cpu.is_local(url) is local


def test_live_figures_divide_each_part_by_its_samples() -> None:
    before, middle, after = cpu.Reading(10.0, 100.0), cpu.Reading(12.0, 101.0), cpu.Reading(20.0, 109.0)
    out = live.figures(before, middle, after, backlog_samples=1000, live_samples=2000)
    assert out == {
        "backlog_cpu_us_per_sample": 2000.0,
        "live_cpu_us_per_sample": 4000.0,
        "live_vs_backlog_cpu": 2.0,
        "backlog_endpoint_cpu_us_per_sample": 1000.0,
        "live_endpoint_cpu_us_per_sample": 4000.0,
        "live_vs_backlog_endpoint_cpu": 4.0,
    }


def test_live_figures_without_an_endpoint_and_with_no_backlog_tick() -> None:
    out = live.figures(cpu.Reading(1.0, None), cpu.Reading(1.0, None), cpu.Reading(1.5, None), 100, 100)
    assert out == {"backlog_cpu_us_per_sample": 0.0, "live_cpu_us_per_sample": 5000.0, "live_vs_backlog_cpu": None}


def _pods(load: Load, first: int, rounds: int) -> list[dict[str, object]]:
    return [orjson.loads(v) for topic, _, v in messages(load, first, rounds) if topic == "scheduler.allocations"]


def test_announced_pods_start_at_their_period_and_end_at_the_first_scrape_after_their_end() -> None:
    load = Load(2, 10, alloc_period_s=150, announce_start=True)
    pods = _pods(load, 0, 30)
    assert [(p["type"], p["time"]) for p in pods if p["data"]["node"] == "node-0000"] == [  # type: ignore[index]
        ("allocation.running", "2026-10-05T00:00:00+00:00"),
        ("allocation.ended", "2026-10-05T00:01:52+00:00"),
        ("allocation.running", "2026-10-05T00:02:30+00:00"),
        ("allocation.ended", "2026-10-05T00:04:22+00:00"),
    ]
    assert len({p["id"] for p in pods}) == len(pods) == 8
    order = [(m["type"], m["time"]) for _, _, v in messages(load, 0, 30) for m in [orjson.loads(v)]]
    ended = order.index(("allocation.ended", "2026-10-05T00:01:52+00:00"))
    assert order[ended - 1] == ("gpu.sample", "2026-10-05T00:02:00+00:00")  # with the first scrape after it


def test_pods_published_at_the_end_of_their_period_by_default() -> None:
    load = Load(1, 30, alloc_period_s=120)
    assert [(p["type"], p["data"]["state"]) for p in _pods(load, 0, 8)] == [  # type: ignore[index]
        ("allocation.ended", "ended"),
        ("allocation.ended", "ended"),
    ]


@pytest.mark.parametrize("points", [1, 7])
def test_query_range_input_parses_into_every_gpu_sample(points: int) -> None:
    load = Load(3, 30, node_prefix="src")
    result = dcgm.parse_query_range(sources.query_range_answer(load, points), cluster="bench")
    assert result.dead_letters == []
    assert sources.gpu_samples(result) == 3 * 8 * points
    gpus = result.events[0].data.gpus
    assert gpus[0].pod == "train-0-worker-0" and gpus[7].pod is None
    assert all(g.fb_used_mib is not None and g.power_w is not None for g in gpus)


def test_exposition_input_holds_the_default_counters_and_parses_into_every_gpu() -> None:
    load = Load(2, 30, node_prefix="src")
    body = sources.exposition(load, 1, 4)
    assert body.count(b"# TYPE ") == len(sources.COUNTERS)
    result = dcgm.parse_exposition(body, cluster="bench", scrape_time=load.round_time(4), node="src-0001")
    assert result.dead_letters == []
    assert [e.data.node for e in result.events] == ["src-0001"]
    assert sources.gpu_samples(result) == 8


def test_prom_parser_bench_reads_every_sample_with_each_parser() -> None:
    result = prom_parser.measure(nodes=2, repeat=1)
    assert result["samples_per_round"] == 2 * 8 * len(sources.COUNTERS)
    assert set(result["samples_per_s"]) == set(prom_parser.PARSERS)
    assert all(rate > 0 for rate in result["samples_per_s"].values())


@pytest.mark.parametrize(
    ("case", "ours", "theirs"),
    [
        ("two values", "refused: line 1: malformed exposition line", "m {} 1 0.003"),
        ("counter without _total", "c {} 5.0 None", "c_total {} 5 None"),
    ],
)
def test_prom_parser_bench_shows_what_each_reader_makes_of_an_odd_line(case: str, ours: str, theirs: str) -> None:
    text = dict(prom_parser.ODD_LINES)[case]
    assert prom_parser.odd_line(text) == {"gpuledger": [ours], "prometheus_client": [theirs]}


def test_table_rows_judge_live_against_backlog_and_each_source() -> None:
    results = {
        "live_cpu_us_per_sample": 150.0,
        "backlog_cpu_us_per_sample": 100.0,
        "live_endpoint_cpu_us_per_sample": 201.0,
        "backlog_endpoint_cpu_us_per_sample": 100.0,
        "parse_publish_samples_per_s": {
            "dcgm_query_range": 31_000.5,
            "dcgm_exposition": 20_000.0,
            "kubernetes_pods": 80.0,
        },
    }
    rows = {label: (value, target, verdict) for label, value, target, verdict in table_rows(results)}
    assert rows["worker CPU per GPU-sample, live"] == ("150.0 µs", "≤ 1.5 × backlog", "met")
    assert rows["ClickHouse endpoint CPU per GPU-sample, live"] == ("201.0 µs", "≤ 2 × backlog", "not met")
    assert rows["collector parse + publish: dcgm_query_range"] == ("31,000.5 GPU-samples/s", "≥ 300,000", "not met")
    assert rows["collector parse + publish: dcgm_exposition"] == ("20,000.0 GPU-samples/s", "—", "")
    assert rows["collector parse + publish: kubernetes_pods"] == ("80.0 records/s", "—", "")


@pytest.mark.parametrize(("rate", "verdict"), [(99_999.9, "not met"), (100_000.0, "met")])
def test_table_rows_judge_replay_against_its_target(rate: float, verdict: str) -> None:
    rows = {label: (target, judged) for label, _, target, judged in table_rows({"replay_samples_per_s": rate})}
    assert rows["replay from offset 0 (incl. worker start)"] == ("≥ 100,000", verdict)


def test_pod_list_input_parses_into_the_allocation_records_it_promises() -> None:
    load = Load(3, 30, node_prefix="src")
    [(parse, expected, count)] = sources.pod_list_polls(load, 10)
    result = parse()
    assert result.dead_letters == []
    assert count(result) == expected == 3 * 10 - 3  # pods 0, 4 and 8 are still running: no ended record
    ended = [e.data for e in result.events if e.type == "allocation.ended"]
    assert sorted({(d.outcome, d.failure_reason) for d in ended}) == [("failure", "oom"), ("success", None)]
    assert {e.data.node for e in result.events if e.type == "allocation.running"} == {
        "src-0000",
        "src-0001",
        "src-0002",
    }


def test_idle_figures_are_each_process_cpu_share_and_its_cost_per_live_sample() -> None:
    # 20 s with no new data: the worker used 0.14 s (0.7 % of a core), the endpoint 0.06 s; live
    # traffic of 256 nodes × 8 GPUs every 10 s is 204.8 GPU-samples/s
    out = live.idle_figures(cpu.Reading(5.0, 50.0), cpu.Reading(5.14, 50.06), 20.0, 204.8)
    assert out == {
        "idle_worker_cpu_pct": 0.7,
        "idle_endpoint_cpu_pct": 0.3,
        "live_idle_cpu_us_per_sample": 34.2,
        "live_idle_endpoint_cpu_us_per_sample": 14.6,
    }
    assert live.idle_figures(cpu.Reading(5.0, None), cpu.Reading(5.0, None), 20.0, 204.8) == {
        "idle_worker_cpu_pct": 0.0,
        "live_idle_cpu_us_per_sample": 0.0,
    }


def test_the_attribution_micro_benchmark_reads_the_benchmark_load_as_published() -> None:
    """The in-process benchmark decodes the messages the benchmark publishes (columns, schema 2):
    both paths give the same fact rows, and every chunk of that load takes the vectorised path."""
    from bench import attribution_micro as micro

    work = micro.chunks(micro.bench_load_histories(nodes=2, hours=1.0))
    result = micro.report("bench_load", work)
    assert result["gpu_samples"] == 2 * 8 * 120  # 2 nodes × 8 GPUs, a scrape every 30 s for an hour
    assert result["fact_rows"] > 0 and result["same_fact_count"]
    assert result["vector_share_of_samples"] == 1.0


def test_the_load_packed_several_scrapes_a_message_stores_the_rows_of_one_scrape_a_message() -> None:
    from bench.load import encode, gpu_messages_in, gpu_samples_in
    from pipelines import wire
    from streams.ingest.rows import as_rows, rows_for

    single, packed = encode(Load(2, 30), 0, 10), encode(Load(2, 30, scrapes_per_message=4), 0, 10)
    assert gpu_samples_in(single) == gpu_samples_in(packed) == 2 * 10 * 8
    assert gpu_messages_in(single) == 20 and gpu_messages_in(packed) == 6  # 4 + 4 + 2 scrapes per node
    assert [m for m in single if m[0] != "gpu.metrics"] == [m for m in packed if m[0] != "gpu.metrics"]

    def rows(batch: list[tuple[str, bytes, bytes]]) -> list[dict[str, object]]:
        events = [wire.decode(value) for topic, _, value in batch if topic == "gpu.metrics"]
        return sorted(as_rows(rows_for(events)[0]["gpu_samples"]), key=lambda r: (r["node"], r["time"], r["uuid"]))

    assert rows(packed) == rows(single)
    assert {orjson.loads(m[2])["schema_version"] for m in packed if m[0] == "gpu.metrics"} == {3}


class _Producer:
    """What ``sources.parse_publish`` needs of EventProducer: a context manager publishing results."""

    def __init__(self, settings: object) -> None:
        self.published = 0

    def __enter__(self) -> _Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def publish_result(self, result: ParseResult) -> None:
        self.published += len(result.events)

    def flush(self) -> None:
        pass


def test_parse_publish_warms_up_on_the_first_poll_then_counts_every_poll_of_each_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sources, "EventProducer", _Producer)
    calls: list[str] = []

    def poll(name: str, events: int) -> sources.Poll:
        def parse() -> ParseResult:
            calls.append(name)
            return ParseResult(events=[object()] * events)  # type: ignore[list-item]

        return parse, events, lambda result: len(result.events)

    parse_s, publish_s, samples = sources.parse_publish(None, [poll("a", 2), poll("b", 3)], rounds=3)  # type: ignore[arg-type]
    assert calls == ["a"] + ["a", "b"] * 3
    assert samples == 3 * (2 + 3) and parse_s > 0 and publish_s > 0


def test_parse_publish_stops_on_a_counted_poll_that_misses_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources, "EventProducer", _Producer)
    results = iter([2, 2, 1])  # the warm-up and the first round give all, the second misses one

    def parse() -> ParseResult:
        return ParseResult(events=[object()] * next(results))  # type: ignore[list-item]

    with pytest.raises(ValueError, match="gave 1 of its 2"):
        sources.parse_publish(None, [(parse, 2, lambda result: len(result.events))], rounds=2)  # type: ignore[arg-type]
