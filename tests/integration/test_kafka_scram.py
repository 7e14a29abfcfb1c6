"""Every process through a SCRAM-authenticated broker.

``up`` starts, in a home of its own and on ports of its own (never the shared services'), the local
Kafka broker with a SASL_PLAINTEXT (SCRAM-SHA-512) listener, an embedded ClickHouse endpoint and a
stream worker (``python -m streams worker``, as ``worker_service`` starts it). The environment the
worker inherits names another protocol, mechanism, user and password: it gets the right ones only
from ``Settings.process_env()``. Then the producer publishes through the secured listener, the
worker writes what it consumed into ClickHouse, ``gpuledger check`` round-trips through it, and a
wrong password ends ``check`` with one line naming authentication, at the first rejection the client
sees (well within kafka-python's 30 s bootstrap), not a traceback or a hang.
"""

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
from pydantic import SecretStr

from bench.load import GPUS_PER_NODE, Load, sample_message
from infra.services import down, up
from pipelines import wire
from pipelines.errors import PublishError
from pipelines.producer import EventProducer
from pipelines.settings import Settings
from sql.client import get_client

# infra.process.start leaves its Popen handles behind on purpose (the pid files track the services)
pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")]

REPO = Path(__file__).resolve().parents[2]
NODES, ROUNDS = 2, 20
# what a worker would inherit from the shell that ran `up`: each value wrong for the broker
AMBIENT = {
    "KAFKA_SECURITY_PROTOCOL": "PLAINTEXT",
    "KAFKA_SASL_MECHANISM": "SCRAM-SHA-256",
    "KAFKA_SASL_USERNAME": "someone-else",
    "KAFKA_SASL_PASSWORD": "not-the-password",
}
OWN_PREFIXES = ("KAFKA_", "CLICKHOUSE_", "GPULEDGER_")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def scram(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    tag = uuid.uuid4().hex[:10]
    with pytest.MonkeyPatch.context() as env:
        for key in [k for k in os.environ if k.startswith(OWN_PREFIXES)]:
            env.delenv(key)  # nothing from the shell: no external Kafka or ClickHouse, no credentials
        for key, value in AMBIENT.items():
            env.setenv(key, value)
        settings = Settings(
            home=tmp_path_factory.mktemp("scram"),
            kafka_bootstrap_servers=None,
            clickhouse_url=None,
            kafka_port=_free_port(),
            kafka_controller_port=_free_port(),
            kafka_internal_port=_free_port(),
            clickhouse_port=_free_port(),
            kafka_heap="384m",
            kafka_security_protocol="SASL_PLAINTEXT",
            kafka_sasl_mechanism="SCRAM-SHA-512",
            kafka_sasl_username="gpuledger",
            kafka_sasl_password=SecretStr(f"s3cret-{tag}"),
            clickhouse_database=f"test_{tag}",
            topic_prefix=f"test-{tag}.",
        )
        try:
            up(settings, workers=1)  # broker, topics through SCRAM, endpoint, migrations, one worker
            yield settings
        finally:
            down(settings)


def _cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    """``gpuledger`` with exactly these settings (``process_env``) over the test's environment."""
    return subprocess.run(
        [sys.executable, "-m", "gpuledger.cli.main", *args],
        env={**os.environ, **settings.process_env()},
        capture_output=True,
        text=True,
        timeout=80,
        cwd=REPO,
        check=False,
    )


def _gpu_sample_rows(settings: Settings) -> int:
    client = get_client(settings)
    try:
        return int(str(client.command("SELECT count() FROM gpu_samples FINAL")))
    finally:
        client.close()


def test_the_local_broker_authenticates_clients_with_scram(scram: Settings) -> None:
    config = (scram.home / "kafka" / "server.properties").read_text()
    assert f"SASL_PLAINTEXT://127.0.0.1:{scram.kafka_port}" in config
    assert "sasl.enabled.mechanisms=SCRAM-SHA-512" in config
    assert f"INTERNAL://127.0.0.1:{scram.kafka_internal_port}" in config  # the broker's own, loopback


def test_the_producer_and_a_stream_worker_work_through_scram(scram: Settings) -> None:
    load = Load(nodes=NODES, interval_s=60)
    with EventProducer(scram) as producer:
        for index in range(ROUNDS):
            for node in range(NODES):
                producer.publish(wire.decode(sample_message(load, node, index)))
    expected = NODES * ROUNDS * GPUS_PER_NODE
    deadline = time.monotonic() + 60
    while (rows := _gpu_sample_rows(scram)) < expected and time.monotonic() < deadline:
        time.sleep(1)
    log = (scram.log_dir / "worker-0.log").read_text()
    assert rows == expected, f"the worker wrote {rows} of {expected} GPU samples; its log ends: {log[-1500:]}"


def test_check_round_trips_through_scram(scram: Settings) -> None:
    checked = _cli(scram, "check")
    assert checked.returncode == 0, checked.stderr
    assert "published and read back" in checked.stdout


def test_a_wrong_password_is_a_one_line_error(scram: Settings) -> None:
    wrong = scram.model_copy(update={"kafka_sasl_password": SecretStr("not-the-password")})
    began = time.monotonic()
    result = _cli(wrong, "check")
    took = time.monotonic() - began
    assert result.returncode == 1
    assert took < 60, f"took {took:.0f}s"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "authentication failed" in lines[0].lower(), lines[0]
    assert "not-the-password" not in result.stderr + result.stdout


def test_the_producer_names_a_rejected_password_at_once(scram: Settings) -> None:
    wrong = scram.model_copy(update={"kafka_sasl_password": SecretStr("not-the-password")})
    began = time.monotonic()
    with pytest.raises(PublishError) as caught:
        EventProducer(wrong)
    assert time.monotonic() - began < 15  # not the connect timeout: the rejection ends the wait
    message = str(caught.value)
    assert message.startswith("Kafka authentication failed (") and "KAFKA_SASL_PASSWORD" in message
    assert "not-the-password" not in message and "\n" not in message


def test_a_collector_publishes_through_scram(scram: Settings) -> None:
    """`gpuledger collect dcgm` scraping a dcgm-exporter endpoint publishes through the secured listener."""
    body = (REPO / "tests" / "fixtures" / "dcgm" / "exporter_3x_hostname.prom").read_bytes()

    class Exporter(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Exporter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        before = _gpu_sample_rows(scram)
        collected = _cli(scram, "collect", "dcgm", "--exporter", f"http://127.0.0.1:{server.server_address[1]}/metrics")
    finally:
        server.shutdown()
        server.server_close()
    assert collected.returncode == 0, collected.stderr
    deadline = time.monotonic() + 60
    while (rows := _gpu_sample_rows(scram)) <= before and time.monotonic() < deadline:
        time.sleep(1)
    assert rows > before  # the worker consumed what the collector published
