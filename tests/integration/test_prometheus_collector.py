"""The dcgm collector's Prometheus mode against a real Prometheus, into the real Kafka broker.

Two dcgm-exporter-format endpoints (one node labelled ``Hostname`` as released exporters do, one
``hostname`` as newer ones do) serve values that change on every scrape and remember what they
served and when. Debian's Prometheus scrapes them every second. The collector then reads a closed
time range with ``query_range`` and publishes to isolated topics; the test reads the topic back.

Prometheus stamps a scrape when it starts it, a little before the exporter answers; so the value
at an evaluation instant *t* is the one served by the last scrape that started at or before *t*.
An instant that falls within ``SLACK`` of a scrape is ambiguous by that much, and there either of
the two neighbouring scrapes is accepted — never anything else.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from kafka import KafkaConsumer

from infra.kafka.broker import ensure_topics
from infra.prometheus.server import DEFAULT_BINARY, PrometheusServer, ScrapeJob, render_config
from pipelines import events as ev
from pipelines import wire
from pipelines.collectors import dcgm as dcgm_collector
from pipelines.collectors.base import Deduplicated, collect_into, producer_sink, run
from pipelines.parsers.base import ParseResult
from pipelines.producer import EventProducer
from pipelines.settings import Settings
from pipelines.topics import GPU_METRICS, physical_name

pytestmark = pytest.mark.integration

SLACK = 0.3  # seconds between Prometheus stamping a scrape and the exporter answering it
WAIT_S = 60.0
MODEL = "NVIDIA H100 80GB HBM3"


@dataclass
class FakeNode:
    """One dcgm-exporter: its GPUs, its host label, and a log of (served at, scrape number)."""

    host: str
    host_label: str
    uuids: list[str]
    served: list[tuple[float, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @staticmethod
    def gr_active(scrape: int, gpu: int) -> float:  # ratio with 2 decimals, different per GPU
        return ((scrape * 7 + gpu * 29) % 101) / 100.0

    @staticmethod
    def util_percent(scrape: int, gpu: int) -> int:
        return (scrape * 13 + gpu * 41 + 5) % 101

    def exposition(self) -> bytes:
        with self.lock:
            scrape = len(self.served)
            self.served.append((time.time(), scrape))
        out = []
        metrics = [
            ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", lambda g: f"{40 + g}"),
            ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", lambda g: f"{300.5 + g:.6f}"),
            ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", lambda g: f"{self.util_percent(scrape, g)}"),
            ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", lambda g: f"{1024 * (g + 1)}"),
            ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", lambda g: "0"),
            (
                "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
                "gauge",
                "Ratio of time the graphics engine is active.",
                lambda g: f"{self.gr_active(scrape, g):.6f}",
            ),
        ]
        for name, kind, help_text, value in metrics:
            out += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
            for gpu, uuid in enumerate(self.uuids):
                labels = (
                    f'gpu="{gpu}",UUID="{uuid}",pci_bus_id="00000000:{0x18 + gpu:02X}:00.0",'
                    f'device="nvidia{gpu}",modelName="{MODEL}",{self.host_label}="{self.host}",'
                    'DCGM_FI_DRIVER_VERSION="535.129.03"'
                )
                out.append(f"{name}{{{labels}}} {value(gpu)}")
        return ("\n".join(out) + "\n").encode()

    def candidates(self, instant: float) -> list[int]:
        """Scrape numbers whose values Prometheus may answer for ``instant``."""
        with self.lock:
            served = list(self.served)
        sure = [k for at, k in served if at <= instant]
        maybe = [k for at, k in served if at - SLACK <= instant]
        if not maybe:
            return []
        low = max(sure) if sure else min(maybe)
        return list(range(low, max(maybe) + 1))


def _serve(node: FakeNode) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            if self.path != "/metrics":
                self.send_error(404)
                return
            body = node.exposition()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


@dataclass
class Stack:
    nodes: list[FakeNode]
    prom: PrometheusServer


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    """Two exporters and a Prometheus scraping them every second, shared by this module's tests."""
    nodes = [
        FakeNode("gpu-node-a", "Hostname", [f"GPU-a{i}000000-0000-0000-0000-00000000000{i}" for i in range(4)]),
        FakeNode("gpu-node-b", "hostname", [f"GPU-b{i}000000-0000-0000-0000-00000000000{i}" for i in range(2)]),
    ]
    servers = [_serve(node) for node in nodes]
    prom: PrometheusServer | None = None
    try:
        targets = [f"127.0.0.1:{server.server_address[1]}" for server in servers]
        config = render_config([ScrapeJob("dcgm", targets)], scrape_interval_s=1, evaluation_interval_s=1)
        prom = PrometheusServer(config).start()
        yield Stack(nodes, prom)
    finally:
        if prom is not None:
            prom.stop()
        for server in servers:
            server.shutdown()
            server.server_close()


def _wait_for_scrapes(nodes: list[FakeNode], count: int, prom: PrometheusServer) -> None:
    deadline = time.monotonic() + WAIT_S
    while min(len(n.served) for n in nodes) < count:
        if time.monotonic() > deadline:
            pytest.fail(
                f"Prometheus did not scrape every exporter {count} times within {WAIT_S:.0f}s: "
                f"{[len(n.served) for n in nodes]}; log: {prom.log_tail(5)}"
            )
        if not prom.running():
            pytest.fail(f"Prometheus exited: {prom.log_tail(5)}")
        time.sleep(0.2)


def _consume(settings: Settings, topic: str, expected: int) -> list[object]:
    consumer = KafkaConsumer(
        topic,
        **settings.kafka_client_config(),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=1500,
    )
    got: list[object] = []
    deadline = time.monotonic() + WAIT_S
    try:
        while len(got) < expected and time.monotonic() < deadline:
            got.extend(consumer)
    finally:
        consumer.close()
    return got


def test_prometheus_binary_is_installed() -> None:
    assert DEFAULT_BINARY.is_file(), f"{DEFAULT_BINARY} is missing: install Debian's prometheus package"


def test_dcgm_from_real_prometheus_into_kafka(stack: Stack, isolated_settings: Settings) -> None:
    ensure_topics(isolated_settings)
    nodes, prom = stack.nodes, stack.prom
    _wait_for_scrapes(nodes, 2, prom)
    start = math.ceil(max(n.served[0][0] for n in nodes) + SLACK)  # every instant from here has a sample
    _wait_for_scrapes(nodes, 1 + math.ceil(start + 8.5 - max(n.served[0][0] for n in nodes)), prom)
    end = math.floor(time.time()) - 3  # settled: the collector's lag is 2 steps
    assert end - start >= 4, (start, end)
    collector = dcgm_collector.prometheus_collector(
        prom.url,
        cluster="itest",
        step_s=1,
        start=datetime.fromtimestamp(start, UTC),
        end=datetime.fromtimestamp(end, UTC),
        match='job="dcgm"',
        max_points=3,
    )
    try:
        with EventProducer(isolated_settings) as producer:
            stats = run(Deduplicated(collector), producer_sink(producer), keep_ids=True)
    finally:
        collector.close()
    assert stats.polls >= 2  # max_points=3 splits the range into several windows
    assert stats.dead_letters == 0
    instants = list(range(start, end + 1))
    expected = len(instants) * len(nodes)
    assert stats.events == expected

    records = _consume(isolated_settings, physical_name(GPU_METRICS, isolated_settings), expected)
    decoded = [wire.decode(r.value) for r in records]  # type: ignore[attr-defined]
    assert len(decoded) == expected, f"read {len(decoded)} of {expected} messages back"
    seen = {(e.data.node, e.time) for e in decoded}
    assert len(seen) == len(decoded), "more than one message for a (node, sample time)"
    by_node = {node.host: node for node in nodes}
    assert {e.data.node for e in decoded} == set(by_node)  # the host label, not 127.0.0.1:port
    for record, event in zip(records, decoded, strict=True):
        assert record.key == f"itest/{event.data.node}".encode()  # type: ignore[attr-defined]
        _check_event(event, by_node[event.data.node])
    for node in nodes:
        times = sorted(e.time.timestamp() for e in decoded if e.data.node == node.host)
        assert times == instants


def _check_event(event: ev.Envelope, node: FakeNode) -> None:
    assert event.source == "dcgm" and event.type == "gpu.sample" and event.cluster == "itest"
    assert event.id == ev.event_id("gpu.sample", "itest", node.host, event.time)
    assert event.data.interval_s == 1.0
    gpus = event.data.gpus
    assert [g.uuid for g in gpus] == node.uuids  # every GPU, ordered by index
    assert [g.index for g in gpus] == list(range(len(node.uuids)))
    assert all(g.model == MODEL and g.xid == 0 and g.mig_instance is None for g in gpus)
    options = node.candidates(event.time.timestamp())
    assert options, f"no scrape of {node.host} could answer {event.time}"
    matches = [
        k
        for k in options
        if all(
            g.gr_engine_active == pytest.approx(node.gr_active(k, i), abs=1e-9)
            and g.gpu_util == pytest.approx(node.util_percent(k, i) / 100.0, abs=1e-9)
            for i, g in enumerate(gpus)
        )
    ]
    assert matches, (
        f"{node.host} at {event.time}: values {[(g.gr_engine_active, g.gpu_util) for g in gpus]} "
        f"match none of the scrapes {options}"
    )


def test_follow_mode_reads_each_new_instant_once(stack: Stack) -> None:
    _wait_for_scrapes(stack.nodes, 5, stack.prom)
    collector = dcgm_collector.prometheus_collector(stack.prom.url, cluster="itest", step_s=1, backfill_s=2)
    collected = ParseResult()
    try:
        stats = run(collector, collect_into(collected), follow=True, interval_s=1.0, max_polls=6)
    finally:
        collector.close()
    assert stats.dead_letters == 0
    by_node = {node.host: node for node in stack.nodes}
    for host, node in by_node.items():
        events = [e for e in collected.events if e.data.node == host]
        times = [e.time.timestamp() for e in events]
        assert len(times) >= 4, f"{host}: only {len(times)} instants in 6 polls"
        assert times == list(range(int(times[0]), int(times[0]) + len(times))), "a gap or a repeat"
        for event in events:
            _check_event(event, node)
