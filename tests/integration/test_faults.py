"""Fault tolerance: the facts after a fault equal the facts of a clean run on the same input.

One clean run of a small synthetic cluster (the benchmark's load: 4 nodes, 2 h of 30 s scrapes,
pods that succeed and fail) gives the reference ``facts_digest``. Each test replays the same
messages through a fresh pipeline with one fault injected and compares digests:
(b) a private Kafka broker stopped and started again during ingestion; (c) a private ClickHouse
endpoint SIGKILLed during the sink and restarted on the same data directory and port; (d) 10k
malformed messages mixed into the good ones — every bad one becomes a dead letter with a reason
and the worker keeps going; (e) the warehouse answers TOO_MANY_SIMULTANEOUS_QUERIES,
MEMORY_LIMIT_EXCEEDED, TIMEOUT_EXCEEDED and a bare 503 for 10 s (a proxy in front of the real
endpoint) — waited out, no dead letter; (f) a table missing — the worker stops, naming it.

(a) is ``test_attribution_e2e.py::test_same_facts_with_two_workers_after_a_kill_and_after_replay``:
it SIGKILLs a worker mid-stream and compares the facts' digest with a clean replay of the same
log (a restarted member waits out the dead one's session timeout, about a minute, so it is not
repeated here).
"""

from __future__ import annotations

import os
import random
import socket
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.load import Load, Message, encode, publish, sample_message
from infra.kafka.broker import broker_service
from infra.process import start, stop
from pipelines.producer import EventProducer
from pipelines.settings import Settings
from pipelines.topics import GPU_METRICS, SCHEDULER_ALLOCATIONS, node_key, physical_name
from sql.client import get_client
from tests.conftest import Endpoints
from tests.integration._endpoint_process import EndpointProcess
from tests.integration._fault_proxy import FaultProxy
from tests.integration.pipeline import Pipeline, wait_for

pytestmark = pytest.mark.integration

LOAD = Load(nodes=4, interval_s=30, alloc_period_s=1800)
ROUNDS = LOAD.rounds_for(2)
BAD = 10_000


def _settings(endpoints: Endpoints, home: Path, **overrides: Any) -> Settings:
    tag = uuid.uuid4().hex[:10]
    home.mkdir(parents=True, exist_ok=True)
    base: dict[str, Any] = {
        "kafka_bootstrap_servers": endpoints.kafka_bootstrap,
        "clickhouse_url": endpoints.clickhouse_url,
        "clickhouse_user": endpoints.clickhouse_user,
        "clickhouse_password": endpoints.clickhouse_password,
        "clickhouse_database": f"test_{tag}",
        "topic_prefix": f"test-{tag}.",
        "home": home,
    }
    return Settings(**{**base, **overrides})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _count(settings: Settings, sql: str) -> int:
    client = get_client(settings)
    try:
        return int(str(client.command(sql)))
    finally:
        client.close()


@pytest.fixture(scope="module")
def messages() -> list[Message]:
    return encode(LOAD, 0, ROUNDS)


@pytest.fixture(scope="module")
def clean_digest(
    endpoints: Endpoints, messages: list[Message], tmp_path_factory: pytest.TempPathFactory
) -> list[tuple[Any, ...]]:
    home = tmp_path_factory.mktemp("clean")
    pipeline = Pipeline(_settings(endpoints, home), home)
    try:
        publish(pipeline.settings, messages)
        pipeline.start_worker(0)
        pipeline.wait(timeout_s=180)
        digest = pipeline.facts_digest()
    finally:
        pipeline.stop_all()
    kinds = {row[3] for row in digest}
    assert {"allocated", "unallocated"} <= kinds and len(digest) > 1000
    return digest


def _half_then_rest(pipeline: Pipeline, messages: list[Message], fault: Any) -> None:
    """Publish half, let the worker start on it, inject the fault, publish the rest, wait."""
    half = len(messages) // 2
    publish(pipeline.settings, messages[:half])
    pipeline.start_worker(0)
    wait_for(lambda: _count(pipeline.settings, "SELECT count() FROM gpu_samples") > 0, 90, "the first rows")
    fault()
    publish(pipeline.settings, messages[half:])


@pytest.fixture
def private_broker(tmp_path: Path, endpoints: Endpoints) -> Iterator[tuple[Settings, Any]]:
    """A broker of our own (own home, ports and data), so stopping it disturbs no other test."""
    home = tmp_path / "home"
    settings = _settings(
        endpoints,
        home,
        kafka_bootstrap_servers=None,
        kafka_port=_free_port(),
        kafka_controller_port=_free_port(),
        kafka_heap="384m",
    )
    service = broker_service(settings)
    start(service)
    try:
        yield settings, service
    finally:
        stop(service)


# infra.process.start leaves the broker's Popen handle behind on purpose (the pid file tracks it)
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_broker_restart_during_ingestion_loses_and_duplicates_nothing(
    private_broker: tuple[Settings, Any], messages: list[Message], clean_digest: list[tuple[Any, ...]], tmp_path: Path
) -> None:
    settings, service = private_broker
    pipeline = Pipeline(settings, tmp_path)
    try:

        def bounce() -> None:
            stop(service)
            time.sleep(2)
            start(service)

        _half_then_rest(pipeline, messages, bounce)
        if pipeline.workers[0].poll() is not None:  # a supervisor restarts a worker that gave up
            pipeline.workers.pop(0)
            pipeline._logs.pop(0).close()
            pipeline.start_worker(1)
        pipeline.wait(timeout_s=180)
        assert pipeline.facts_digest() == clean_digest
        samples = sum(1 for topic, _, _ in messages if topic == GPU_METRICS.name) * 8
        assert _count(settings, "SELECT count() FROM gpu_samples FINAL") == samples
        assert _count(settings, "SELECT count() FROM dead_letters") == 0
    finally:
        pipeline.stop_all()


def test_clickhouse_restart_during_the_sink_is_retried_and_loses_nothing(
    endpoints: Endpoints, messages: list[Message], clean_digest: list[tuple[Any, ...]], tmp_path: Path
) -> None:
    data, port = tmp_path / "chdb", _free_port()
    env = {k: v for k, v in os.environ.items() if "CLICKHOUSE" not in k}
    endpoint = [EndpointProcess(data, env=env, args=("--port", str(port)))]
    settings = _settings(
        endpoints, tmp_path / "home", clickhouse_url=endpoint[0].url, clickhouse_user="default", clickhouse_password=""
    )
    pipeline = Pipeline(settings, tmp_path)
    try:

        def crash_and_restart() -> None:
            endpoint[0].proc.kill()
            endpoint[0].stop()
            time.sleep(3)  # the worker's inserts fail meanwhile and are retried
            endpoint[0] = EndpointProcess(data, env=env, args=("--port", str(port)))

        _half_then_rest(pipeline, messages, crash_and_restart)
        pipeline.wait(timeout_s=180)
        assert pipeline.facts_digest() == clean_digest
        assert pipeline.workers[0].poll() is None
    finally:
        pipeline.stop_all()
        endpoint[0].stop()


def malformed(i: int) -> bytes:
    """Five kinds of garbage, each message unique (dead letters are keyed by their content)."""
    good = sample_message(replace(LOAD, node_prefix="bad"), i % 7, 100_000 + i)
    kind = i % 5
    if kind == 0:
        return f"{i}:".encode() + random.Random(i).randbytes(40)
    if kind == 1:
        return good[: len(good) // 2]
    if kind == 2:
        return orjson.dumps({"identifier": i, "payload": "not an envelope"})
    obj = orjson.loads(good)  # a node scrape in columns (gpu.sample schema version 2)
    if kind == 3:
        obj["data"]["gr_engine_active"] = f"eight gpus, honest ({i})"
    else:
        obj["data"]["gr_engine_active"][0] = 1.5 + i
    return orjson.dumps(obj)


def test_ten_thousand_malformed_messages_are_dead_letters_and_the_good_ones_are_attributed(
    endpoints: Endpoints, messages: list[Message], clean_digest: list[tuple[Any, ...]], tmp_path: Path
) -> None:
    pipeline = Pipeline(_settings(endpoints, tmp_path), tmp_path)
    settings = pipeline.settings
    try:
        pipeline.start_worker(0)
        with EventProducer(settings) as producer:
            for n, (topic, key, value) in enumerate(messages):  # about ten bad ones after each good one
                producer.send_raw(physical_name(topic, settings), key, value)
                for bad in range(n * BAD // len(messages), (n + 1) * BAD // len(messages)):
                    target = GPU_METRICS if bad % 3 else SCHEDULER_ALLOCATIONS
                    producer.send_raw(
                        physical_name(target, settings), node_key("bench", f"x{bad % 11}"), malformed(bad)
                    )
        pipeline.wait(timeout_s=180)
        assert pipeline.facts_digest() == clean_digest
        # the worker writes dead letters to <topic>.dlq as it goes; the dlq sink copies them in
        wait_for(lambda: _count(settings, "SELECT count() FROM dead_letters FINAL") >= BAD, 90, "the dead letters")
        assert _count(settings, "SELECT count() FROM dead_letters FINAL") == BAD
        assert _count(settings, "SELECT countIf(reason = '') FROM dead_letters FINAL") == 0
        assert pipeline.workers[0].poll() is None
        later = LOAD.round_time(ROUNDS + 10)
        with EventProducer(settings) as producer:
            producer.send_raw(
                physical_name(GPU_METRICS, settings),
                node_key("bench", "node-0000"),
                sample_message(LOAD, 0, ROUNDS + 10),
            )
        wait_for(
            lambda: _count(settings, f"SELECT count() FROM gpu_samples WHERE time = '{later:%Y-%m-%d %H:%M:%S}'") == 8,
            60,
            "a good message after the garbage",
        )
    finally:
        pipeline.stop_all()


def test_an_overloaded_warehouse_is_waited_out_without_dead_letters(
    endpoints: Endpoints, messages: list[Message], clean_digest: list[tuple[Any, ...]], tmp_path: Path
) -> None:
    """The endpoint answers TOO_MANY_SIMULTANEOUS_QUERIES, MEMORY_LIMIT_EXCEEDED, TIMEOUT_EXCEEDED
    and a bare 503 for 10 s mid-stream: every batch waits and is written once it passes."""
    proxy = FaultProxy(endpoints.clickhouse_url)
    pipeline = Pipeline(_settings(endpoints, tmp_path, clickhouse_url=proxy.url), tmp_path)
    try:
        _half_then_rest(pipeline, messages, lambda: proxy.fail_for(10))
        wait_for(lambda: proxy.failed >= 8, 30, "the worker to meet the failing warehouse")
        wait_for(lambda: not proxy.failing, 30, "the end of the fault")  # this test reads through the proxy too
        pipeline.wait(timeout_s=180)
        assert pipeline.facts_digest() == clean_digest
        samples = sum(1 for topic, _, _ in messages if topic == GPU_METRICS.name) * 8
        assert _count(pipeline.settings, "SELECT count() FROM gpu_samples FINAL") == samples
        assert _count(pipeline.settings, "SELECT count() FROM dead_letters") == 0
        assert pipeline.workers[0].poll() is None
    finally:
        pipeline.stop_all()
        proxy.close()


def test_a_warehouse_without_the_tables_stops_the_worker_loudly(
    endpoints: Endpoints, messages: list[Message], tmp_path: Path
) -> None:
    """A schema error is not a bad message: nothing becomes a dead letter, the worker exits naming it."""
    pipeline = Pipeline(_settings(endpoints, tmp_path), tmp_path)
    try:
        client = get_client(pipeline.settings)
        try:
            client.command("DROP TABLE gpu_samples")
        finally:
            client.close()
        publish(pipeline.settings, messages[:50])
        pipeline.start_worker(0)
        pipeline.workers[0].wait(timeout=120)
        assert pipeline.workers[0].returncode != 0
        log = (tmp_path / "worker-0.log").read_text()
        assert "code 60" in log and "gpuledger migrate" in log
        assert _count(pipeline.settings, "SELECT count() FROM dead_letters") == 0
    finally:
        pipeline.stop_all()
