"""One settings → environment path: a child process given ``process_env()`` has the same Kafka and
ClickHouse settings, and Faust gets the same Kafka security as the kafka-python clients."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from faust.auth import SASLCredentials
from pydantic import ValidationError

from pipelines.settings import Settings

# where the local services listen: a child reaches them through the addresses it is given
LOCAL_SERVICE = {
    "kafka_port",
    "kafka_controller_port",
    "kafka_internal_port",
    "kafka_heap",
    "clickhouse_host",
    "clickhouse_port",
}
ADDRESSES = {"kafka_bootstrap_servers": "bootstrap_servers", "clickhouse_url": "clickhouse_endpoint_url"}
# every other Kafka / ClickHouse field, including any added later, must survive the round trip
CONNECTION = sorted(
    f
    for f in Settings.model_fields
    if f.startswith(("kafka_", "clickhouse_")) and f not in LOCAL_SERVICE and f not in ADDRESSES
)
PARENTS = {
    "external SASL_SSL": dict(
        kafka_bootstrap_servers="k1:9093,k2:9093",
        kafka_security_protocol="SASL_SSL",
        kafka_sasl_mechanism="SCRAM-SHA-512",
        kafka_sasl_username="svc",
        kafka_sasl_password="pw",
        kafka_ssl_cafile="/etc/ca.pem",
        clickhouse_url="https://ch:8443",
        clickhouse_user="writer",
        clickhouse_password="chpw",
        clickhouse_database="ledger",
        topic_prefix="prod.",
        window_seconds=30,
        stream_session_timeout_seconds=12.5,
    ),
    "local SCRAM broker": dict(
        kafka_port=19092,
        kafka_security_protocol="SASL_PLAINTEXT",
        kafka_sasl_mechanism="SCRAM-SHA-512",
        kafka_sasl_username="gpuledger",
        kafka_sasl_password="s3cret",
        clickhouse_port=18123,
    ),
    "defaults": {},
}
AMBIENT = {
    "KAFKA_SECURITY_PROTOCOL": "SSL",
    "KAFKA_SASL_MECHANISM": "PLAIN",
    "KAFKA_SASL_USERNAME": "ambient",
    "KAFKA_SASL_PASSWORD": "ambient",
    "KAFKA_SSL_CAFILE": "/ambient.pem",
    "CLICKHOUSE_PASSWORD": "ambient",
    "GPULEDGER_WINDOW_SECONDS": "7",
}


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [k for k in os.environ if k.startswith(("KAFKA_", "CLICKHOUSE_", "GPULEDGER_"))]:
        monkeypatch.delenv(key)


def _from_kwargs(env: dict[str, str], _: pytest.MonkeyPatch) -> Settings:
    return Settings(**env)  # type: ignore[arg-type]


def _from_environment(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    """What a worker started by ``up`` reads: its inherited environment overlaid with ``env``."""
    for key, value in {**AMBIENT, **env}.items():
        monkeypatch.setenv(key, value)
    return Settings()


def _connection(settings: Settings) -> dict[str, object]:
    fields = {name: getattr(settings, name) for name in CONNECTION}
    return {**fields, **{prop: getattr(settings, prop) for prop in ADDRESSES.values()}}


@pytest.mark.parametrize("build", [_from_kwargs, _from_environment])
@pytest.mark.parametrize("parent", list(PARENTS.values()), ids=list(PARENTS))
def test_process_env_round_trips_every_kafka_and_clickhouse_field(
    parent: dict[str, object],
    build: Callable[[dict[str, str], pytest.MonkeyPatch], Settings],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = Settings(**parent)  # type: ignore[arg-type]
    child = build(original.process_env(), monkeypatch)
    assert _connection(child) == _connection(original)  # SecretStr compares by value
    assert child.kafka_client_config() == original.kafka_client_config()


def test_the_child_gets_the_attribution_settings_too(monkeypatch: pytest.MonkeyPatch) -> None:
    original = Settings(**PARENTS["external SASL_SSL"])  # type: ignore[arg-type]
    child = _from_environment(original.process_env(), monkeypatch)
    names = (
        "topic_prefix",
        "home",
        "window_seconds",
        "allowed_lateness_seconds",
        "future_tolerance_seconds",
        "stream_session_timeout_seconds",
    )
    assert {n: getattr(child, n) for n in names} == {n: getattr(original, n) for n in names}


@pytest.mark.parametrize(
    ("protocol", "kind", "mechanism"),
    [
        ("PLAINTEXT", None, None),
        ("SASL_PLAINTEXT", "SASLCredentials", "SCRAM-SHA-512"),
        ("SASL_SSL", "SASLCredentials", "SCRAM-SHA-512"),
        ("SSL", "SSLCredentials", None),
    ],
)
def test_faust_gets_the_same_kafka_security(protocol: str, kind: str | None, mechanism: str | None) -> None:
    sasl = dict(kafka_sasl_mechanism="scram-sha-512", kafka_sasl_username="svc", kafka_sasl_password="pw")
    settings = Settings(kafka_security_protocol=protocol.lower(), **sasl)  # type: ignore[arg-type]
    credentials = settings.faust_credentials()
    assert type(credentials).__name__ == (kind or "NoneType")
    if credentials is not None:  # what aiokafka is given: the protocol kafka-python is given
        assert credentials.protocol.value == settings.kafka_client_config()["security_protocol"] == protocol
    if mechanism is not None:
        assert isinstance(credentials, SASLCredentials)
        assert (credentials.username, credentials.password, credentials.mechanism.value) == ("svc", "pw", mechanism)


@pytest.mark.parametrize(
    "settings",
    [
        dict(kafka_security_protocol="SASL_PLAINTEXT", kafka_sasl_password="hunter2-secret"),
        dict(kafka_security_protocol="SASL_SSL", kafka_sasl_mechanism="SCRAM-SHA-512", kafka_sasl_username="svc"),
        dict(
            kafka_security_protocol="SASL_PLAINTEXT",
            kafka_sasl_mechanism="GSSAPI",
            kafka_sasl_username="svc",
            kafka_sasl_password="hunter2-secret",
        ),
        dict(kafka_security_protocol="TLS"),
    ],
)
def test_incomplete_kafka_security_is_refused_without_echoing_secrets(settings: dict[str, str]) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(**settings)  # type: ignore[arg-type]
    assert "KAFKA_SECURITY_PROTOCOL" in str(refused.value)
    assert "hunter2" not in str(refused.value)


def test_metrics_bind_to_the_configured_address_for_probes_and_scrapes_in_a_pod(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Loopback by default (a laptop exposes nothing); a pod sets GPULEDGER_METRICS_HOST=0.0.0.0 so
    the kubelet's probes and Prometheus reach /metrics; a worker started by `up` inherits it."""
    import socket
    import urllib.request

    from pipelines.process_metrics import serve_metrics

    assert str(Settings().metrics_host) == "127.0.0.1"
    monkeypatch.setenv("GPULEDGER_METRICS_HOST", "0.0.0.0")  # noqa: S104
    settings = Settings()
    assert settings.process_env()["GPULEDGER_METRICS_HOST"] == "0.0.0.0"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    serve_metrics(port, str(settings.metrics_host))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:  # this machine's non-loopback address
        probe.connect(("10.255.255.255", 1))  # a UDP "connect" sends nothing; it picks the route's address
        own = probe.getsockname()[0]
    assert not own.startswith("127."), "the test needs an address beside loopback"
    with urllib.request.urlopen(f"http://{own}:{port}/metrics", timeout=5) as answer:  # noqa: S310
        assert answer.status == 200 and b"python_info" in answer.read()
    monkeypatch.setenv("GPULEDGER_METRICS_HOST", "all")
    with pytest.raises(ValidationError, match="metrics_host"):
        Settings()
