"""The local broker's configuration: the default start is PLAINTEXT as it always was; with
``KAFKA_SECURITY_PROTOCOL=SASL_PLAINTEXT`` the clients' listener authenticates with SCRAM and the
configured user is created when the storage is formatted."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from infra.errors import ServiceError
from infra.kafka import broker
from infra.kafka.broker import _scram_credential, render_config
from pipelines.settings import Settings

SCRAM = dict(
    kafka_security_protocol="SASL_PLAINTEXT",
    kafka_sasl_mechanism="SCRAM-SHA-512",
    kafka_sasl_username="gpuledger",
    kafka_sasl_password="s3cret",
    kafka_port=19092,
    kafka_controller_port=19093,
    kafka_internal_port=19094,
)


def _properties(settings: Settings) -> dict[str, str]:
    lines = render_config(settings).read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def test_the_default_broker_serves_plaintext_as_before(tmp_path: Path) -> None:
    props = _properties(Settings(home=tmp_path, kafka_port=19092, kafka_controller_port=19093))
    assert {
        k: props[k]
        for k in (
            "listeners",
            "advertised.listeners",
            "inter.broker.listener.name",
            "listener.security.protocol.map",
            "controller.listener.names",
        )
    } == {
        "listeners": "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093",
        "advertised.listeners": "PLAINTEXT://127.0.0.1:19092",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
    }
    assert not any("sasl" in key for key in props)


def test_the_scram_broker_authenticates_clients_and_talks_to_itself_on_loopback(tmp_path: Path) -> None:
    props = _properties(Settings(home=tmp_path, **SCRAM))  # type: ignore[arg-type]
    assert props["listeners"] == (
        "SASL_PLAINTEXT://127.0.0.1:19092,INTERNAL://127.0.0.1:19094,CONTROLLER://127.0.0.1:19093"
    )
    assert props["advertised.listeners"] == "SASL_PLAINTEXT://127.0.0.1:19092,INTERNAL://127.0.0.1:19094"
    assert props["inter.broker.listener.name"] == "INTERNAL"
    assert props["listener.name.sasl_plaintext.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert "ScramLoginModule" in props["listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config"]
    assert "s3cret" not in render_config(Settings(home=tmp_path, **SCRAM)).read_text()  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("password", "argument"),
    [
        ("s3cret", ["--add-scram", "SCRAM-SHA-512=[name=gpuledger,password=s3cret]"]),
        ("with,comma]", []),  # StorageTool cannot carry it: set at start through the loopback listener
    ],
)
def test_the_configured_user_is_created_with_the_storage(password: str, argument: list[str]) -> None:
    assert _scram_credential(Settings(**{**SCRAM, "kafka_sasl_password": password})) == argument  # type: ignore[arg-type]
    assert _scram_credential(Settings()) == []


@pytest.mark.parametrize(
    "settings",
    [
        dict(kafka_security_protocol="SSL"),
        dict(SCRAM, kafka_sasl_mechanism="PLAIN"),
    ],
)
def test_what_the_local_broker_cannot_serve_is_refused(tmp_path: Path, settings: dict[str, object]) -> None:
    with pytest.raises(ServiceError):
        render_config(Settings(home=tmp_path, **settings))  # type: ignore[arg-type]


def test_a_cluster_id_never_reads_as_an_option(monkeypatch: pytest.MonkeyPatch) -> None:
    """One id in 64 would start with '-' (0xF8..0xFB as the first byte) and the storage tool would
    take it for an option; Kafka's own random ids skip those, and so do ours."""
    draws = iter([uuid.UUID(bytes=bytes([0xF8]) + bytes(15)), uuid.UUID(bytes=bytes([0x12]) + bytes(15))])
    monkeypatch.setattr(broker.uuid, "uuid4", lambda: next(draws))
    cluster_id = broker._cluster_id()
    assert not cluster_id.startswith("-")
    assert len(cluster_id) == 22
