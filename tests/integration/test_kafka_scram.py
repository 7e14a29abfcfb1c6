"""Every process through a SCRAM-authenticated broker: the local Kafka broker started with a
SASL_PLAINTEXT (SCRAM-SHA-512) listener; a collector, the producer, a Faust stream worker and
`gpuledger check` all work through it with the settings → environment path the services use; a
wrong password is a one-line error, promptly."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from kafka import KafkaConsumer
from pydantic import SecretStr

from bench.load import Load, encode, publish
from infra.kafka.broker import broker_service
from infra.process import start, stop
from pipelines.settings import Settings
from sql.client import get_client
from tests.conftest import Endpoints
from tests.integration.pipeline import REPO, Pipeline

# infra.process.start leaves the broker's Popen handle behind on purpose (the pid file tracks it)
pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")]
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm" / "exporter_3x_hostname.prom"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def scram(endpoints: Endpoints, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    home = tmp_path_factory.mktemp("scram")
    tag = uuid.uuid4().hex[:10]
    settings = Settings(
        kafka_port=_free_port(), kafka_controller_port=_free_port(), kafka_internal_port=_free_port(),
        kafka_heap="384m", kafka_security_protocol="SASL_PLAINTEXT", kafka_sasl_mechanism="SCRAM-SHA-512",
        kafka_sasl_username="gpuledger", kafka_sasl_password=f"s3cret-{tag}", home=home,
        clickhouse_url=endpoints.clickhouse_url, clickhouse_user=endpoints.clickhouse_user,
        clickhouse_password=endpoints.clickhouse_password, clickhouse_database=f"test_{tag}",
        topic_prefix=f"test-{tag}.",
    )
    service = broker_service(settings)
    start(service)
    try:
        yield settings
    finally:
        stop(service)


def _cli(settings: Settings, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "CLICKHOUSE_"))}
    return subprocess.run([sys.executable, "-m", "pipelines.cli.main", *args], env={**env, **settings.process_env()},
                          capture_output=True, text=True, timeout=timeout, cwd=REPO, check=False)


def test_collector_producer_worker_and_check_work_through_scram(scram: Settings, tmp_path: Path) -> None:
    assert "SASL_PLAINTEXT://" in (scram.home / "kafka" / "server.properties").read_text()
    pipeline = Pipeline(scram, tmp_path)  # topics and migrations through the secured broker
    try:
        load = Load(nodes=2, interval_s=60)
        publish(scram, encode(load, 0, 30))  # the producer
        pipeline.start_worker(0)  # a Faust worker, given the settings by process_env()
        pipeline.wait(timeout_s=180)
        client = get_client(scram)
        try:
            assert client.command("SELECT uniqExact(window_start) FROM current_facts") == 30
        finally:
            client.close()

        with _exporter(FIXTURE.read_bytes()) as url:  # a collector, scraping a dcgm-exporter
            collected = _cli(scram, "collect", "dcgm", "--exporter", url)
        assert collected.returncode == 0, collected.stderr
        consumer = KafkaConsumer(f"{scram.topic_prefix}gpu.metrics", **scram.kafka_client_config(),
                                 auto_offset_reset="earliest", consumer_timeout_ms=5000)
        try:
            sources = {record.value.split(b'"source":"')[1].split(b'"')[0] for record in consumer}
        finally:
            consumer.close()
        assert b"dcgm" in sources

        checked = _cli(scram, "check")
        assert checked.returncode == 0, checked.stderr
        assert "published and read back" in checked.stdout
    finally:
        pipeline.stop_all()


def test_a_wrong_password_is_a_one_line_error(scram: Settings) -> None:
    wrong = scram.model_copy(update={"kafka_sasl_password": SecretStr("not-the-password")})
    began = time.monotonic()
    result = _cli(wrong, "check", timeout=90)
    assert result.returncode != 0
    assert time.monotonic() - began < 60
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "authentication" in lines[0].lower()


class _Exporter:
    def __init__(self, body: bytes) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def __enter__(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/metrics"

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _exporter(body: bytes) -> _Exporter:
    return _Exporter(body)
