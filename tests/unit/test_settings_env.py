"""One settings → environment path: a child process given ``process_env()`` has the same settings."""

from __future__ import annotations

import pytest

from pipelines.settings import Settings

FIELDS = ("bootstrap_servers", "kafka_security_protocol", "kafka_sasl_mechanism", "kafka_sasl_username",
          "kafka_ssl_cafile", "clickhouse_endpoint_url", "clickhouse_user", "clickhouse_database", "topic_prefix",
          "home", "window_seconds", "allowed_lateness_seconds", "future_tolerance_seconds")


def test_a_child_process_gets_exactly_these_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    parent = Settings(kafka_bootstrap_servers="k1:9093,k2:9093", kafka_security_protocol="SASL_SSL",
                      kafka_sasl_mechanism="SCRAM-SHA-512", kafka_sasl_username="svc", kafka_sasl_password="pw",
                      kafka_ssl_cafile="/etc/ca.pem", clickhouse_url="https://ch:8443", clickhouse_user="writer",
                      clickhouse_password="chpw", clickhouse_database="ledger", topic_prefix="prod.",
                      window_seconds=30, allowed_lateness_seconds=120, future_tolerance_seconds=60)
    for key in ("KAFKA_SECURITY_PROTOCOL", "KAFKA_SASL_PASSWORD", "GPULEDGER_WINDOW_SECONDS"):
        monkeypatch.setenv(key, "ambient")  # what the parent's own environment says must not matter
    for key, value in parent.process_env().items():
        monkeypatch.setenv(key, value)
    child = Settings()
    assert {f: getattr(child, f) for f in FIELDS} == {f: getattr(parent, f) for f in FIELDS}
    assert child.kafka_sasl_password is not None and child.kafka_sasl_password.get_secret_value() == "pw"
    assert child.clickhouse_password.get_secret_value() == "chpw"
    assert child.kafka_client_config() == parent.kafka_client_config()


def test_faust_gets_the_same_kafka_security() -> None:
    assert Settings().faust_credentials() is None
    scram = Settings(kafka_security_protocol="SASL_PLAINTEXT", kafka_sasl_mechanism="SCRAM-SHA-512",
                     kafka_sasl_username="svc", kafka_sasl_password="pw").faust_credentials()
    assert (scram.username, scram.password, scram.mechanism.value) == ("svc", "pw", "SCRAM-SHA-512")
    assert scram.ssl_context is None


def test_unset_optional_values_stay_unset_through_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in Settings().process_env().items():
        monkeypatch.setenv(key, value)
    child = Settings()
    assert child.kafka_sasl_mechanism is None and child.kafka_sasl_password is None and child.kafka_ssl_cafile is None
    assert "sasl_mechanism" not in child.kafka_client_config()
