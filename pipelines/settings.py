"""One validated settings object per process.

Read once when a process starts (``get_settings()``), never at import time. Every field is
documented in ``infra/.env.example``. Secrets come only from the environment and are held as
``SecretStr`` so they never show up in logs or reprs.
"""

from __future__ import annotations

from functools import lru_cache
from ipaddress import IPv4Address
from pathlib import Path
from typing import TYPE_CHECKING, Self
from urllib.parse import urlparse

from pydantic import AliasChoices, Field, IPvAnyAddress, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

if TYPE_CHECKING:  # faust is imported only by the processes that run it
    from faust.types.auth import CredentialsT

# state lives beside the checkout by default, whatever the working directory
DEFAULT_HOME = Path(__file__).resolve().parent.parent / ".gpuledger"
KAFKA_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# kafka-python's reconnect backoff grows to 30 s by default; the Java client's stops at 1 s. With 1 s
# a client retries often enough within its 30 s bootstrap that a broker's SASL rejection reaches
# its log (kafka-python 3.0 drops a rejection that arrives together with the broker's close).
RECONNECT_BACKOFF_MAX_MS = 1000


def _alias(name: str) -> AliasChoices:
    """Accept both the conventional variable name and the GPULEDGER_-prefixed one."""
    return AliasChoices(name, f"GPULEDGER_{name}")


class Settings(BaseSettings):
    # errors never echo the input: it holds the secrets
    model_config = SettingsConfigDict(
        env_prefix="GPULEDGER_", extra="ignore", populate_by_name=True, hide_input_in_errors=True
    )

    # --- local state -------------------------------------------------------------------------
    home: Path = Field(default=DEFAULT_HOME, description="pid files, logs, Kafka and chdb data")
    cluster: str = Field(default="default", description="cluster name stamped on events without one")

    # --- Kafka --------------------------------------------------------------------------------
    kafka_bootstrap_servers: str | None = Field(
        default=None,
        validation_alias=_alias("KAFKA_BOOTSTRAP_SERVERS"),
        description="external Kafka; when set, `up` starts no broker",
    )
    kafka_port: int = 9092
    kafka_controller_port: int = 9093
    kafka_internal_port: int = Field(default=9094, description="the local SCRAM broker's own loopback listener")
    kafka_heap: str = "768m"
    kafka_security_protocol: str = Field(default="PLAINTEXT", validation_alias=_alias("KAFKA_SECURITY_PROTOCOL"))
    kafka_sasl_mechanism: str | None = Field(default=None, validation_alias=_alias("KAFKA_SASL_MECHANISM"))
    kafka_sasl_username: str | None = Field(default=None, validation_alias=_alias("KAFKA_SASL_USERNAME"))
    kafka_sasl_password: SecretStr | None = Field(default=None, validation_alias=_alias("KAFKA_SASL_PASSWORD"))
    kafka_ssl_cafile: str | None = Field(default=None, validation_alias=_alias("KAFKA_SSL_CAFILE"))
    topic_prefix: str = Field(default="", description="prefix for every topic name (tests isolate with it)")
    topic_retention_ms: int = Field(
        default=-1, ge=-1, description="retention.ms of the topics `up` creates (-1: keep the log)"
    )

    # --- ClickHouse ---------------------------------------------------------------------------
    clickhouse_url: str | None = Field(
        default=None,
        validation_alias=_alias("CLICKHOUSE_URL"),
        description="external ClickHouse, e.g. https://host:8443; when set, `up` starts no endpoint",
    )
    clickhouse_user: str = Field(default="default", validation_alias=_alias("CLICKHOUSE_USER"))
    clickhouse_password: SecretStr = Field(default=SecretStr(""), validation_alias=_alias("CLICKHOUSE_PASSWORD"))
    clickhouse_database: str = Field(default="gpuledger", validation_alias=_alias("CLICKHOUSE_DATABASE"))
    clickhouse_cluster: str = Field(
        default="",
        validation_alias=_alias("CLICKHOUSE_CLUSTER"),
        description="a self-managed ClickHouse cluster's name: the database is created Replicated on it "
        "and every table Replicated* (docs/SCALING.md); empty for one server or ClickHouse Cloud",
    )
    clickhouse_reader_user: str = Field(
        default="gpuledger_reader",
        validation_alias=_alias("CLICKHOUSE_READER_USER"),
        description="read-only account of Grafana and `gpuledger serve` (created by `gpuledger migrate`)",
    )
    clickhouse_reader_password: SecretStr = Field(
        default=SecretStr(""), validation_alias=_alias("CLICKHOUSE_READER_PASSWORD")
    )
    clickhouse_host: str = Field(default="127.0.0.1", description="bind address of the embedded endpoint")
    clickhouse_port: int = 8123

    # --- Prometheus (collector live mode and integration tests) -------------------------------
    prometheus_url: str | None = Field(default=None, validation_alias=_alias("PROMETHEUS_URL"))
    prometheus_port: int = 9090

    # --- HTTP API (gpuledger serve) -----------------------------------------------------------
    api_tokens: SecretStr | None = Field(
        default=None, description="'<token>=all,<token>=business_unit:<name>' (or serve --tokens-file)"
    )
    trusted_user_header: str | None = Field(
        default=None,
        description="header naming the user an authenticating reverse proxy logged in (e.g. "
        "X-Forwarded-Email of oauth2-proxy); off by default; safe ONLY when serve is reachable through that "
        "proxy alone",
    )
    trusted_users: str | None = Field(
        default=None, description="with trusted_user_header: '<user>=all,<user>=business_unit:<name>'"
    )

    metrics_port: int = Field(
        default=0,
        ge=0,
        le=65535,
        description="/metrics of a collector (and of stream worker N at this port + N); 0: none",
    )
    metrics_host: IPvAnyAddress = Field(
        default=IPv4Address("127.0.0.1"),
        description="address /metrics binds to: loopback by default; 0.0.0.0 in a pod, for Prometheus and probes",
    )

    # --- attribution --------------------------------------------------------------------------
    window_seconds: int = Field(default=60, ge=1, le=3600)
    allowed_lateness_seconds: int = Field(default=300, ge=0)
    future_tolerance_seconds: int = Field(
        default=300, ge=0, description="events later than now + this are dead letters (a node clock ahead)"
    )
    stream_workers: int = Field(default=1, ge=0, le=16, description="workers `up` starts in the background")
    stream_session_timeout_seconds: float = Field(
        default=60.0,
        ge=6.0,
        le=300.0,
        description="a worker that sent no heartbeat for this long has left its group: its partitions go to "
        "the others (the broker's group.min.session.timeout.ms is 6 s)",
    )

    # --- owners from pod labels (the Kubernetes parsers; events parsed from then on) ------------
    team_label_keys: str = Field(
        default="team",
        description="pod labels naming the team, comma-separated, the first present wins "
        "(e.g. app.kubernetes.io/part-of,team)",
    )
    model_label_keys: str = Field(
        default="model", description="pod labels naming the model, comma-separated, the first present wins"
    )

    @field_validator("clickhouse_url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        parsed = urlparse(value)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"CLICKHOUSE_URL must be http(s)://host[:port], got {value!r}")
        return value

    @field_validator(
        "kafka_sasl_mechanism",
        "kafka_sasl_username",
        "kafka_sasl_password",
        "kafka_ssl_cafile",
        "api_tokens",
        mode="before",
    )
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("kafka_security_protocol", "kafka_sasl_mechanism")
    @classmethod
    def _upper(cls, value: str | None) -> str | None:
        return value.upper() if value else value

    @model_validator(mode="after")
    def _check_kafka_security(self) -> Self:
        protocol = self.kafka_security_protocol
        if protocol not in KAFKA_PROTOCOLS:
            raise ValueError(f"KAFKA_SECURITY_PROTOCOL must be one of {', '.join(KAFKA_PROTOCOLS)}, got {protocol!r}")
        complete = (
            self.kafka_sasl_mechanism in SASL_MECHANISMS
            and bool(self.kafka_sasl_username)
            and self.kafka_sasl_password is not None
        )
        if protocol.startswith("SASL") and not complete:
            raise ValueError(
                f"KAFKA_SECURITY_PROTOCOL={protocol} needs KAFKA_SASL_MECHANISM (one of "
                f"{', '.join(SASL_MECHANISMS)}), KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD"
            )
        return self

    @field_validator("clickhouse_database", "topic_prefix")
    @classmethod
    def _check_identifier(cls, value: str) -> str:
        if value and not all(ch.isalnum() or ch in "_.-" for ch in value):
            raise ValueError(f"only letters, digits, '_', '.' and '-' are allowed, got {value!r}")
        return value

    # --- derived ------------------------------------------------------------------------------
    @property
    def team_label_key_list(self) -> tuple[str, ...]:
        return tuple(k.strip() for k in self.team_label_keys.split(",") if k.strip()) or ("team",)

    @property
    def model_label_key_list(self) -> tuple[str, ...]:
        return tuple(k.strip() for k in self.model_label_keys.split(",") if k.strip()) or ("model",)

    @property
    def external_kafka(self) -> bool:
        return bool(self.kafka_bootstrap_servers)

    @property
    def external_clickhouse(self) -> bool:
        return bool(self.clickhouse_url)

    @property
    def bootstrap_servers(self) -> str:
        return self.kafka_bootstrap_servers or f"127.0.0.1:{self.kafka_port}"

    @property
    def clickhouse_endpoint_url(self) -> str:
        return self.clickhouse_url or f"http://{self.clickhouse_host}:{self.clickhouse_port}"

    @property
    def run_dir(self) -> Path:
        return self.home / "run"

    @property
    def log_dir(self) -> Path:
        return self.home / "logs"

    def process_env(self) -> dict[str, str]:
        """Environment variables that give a child process (a stream worker) these same settings.

        Every Kafka and ClickHouse connection setting is here, an unset one as "" (read back as
        unset), so the child's own environment cannot add a password or a protocol of its own:
        ``tests/unit/test_settings_env.py`` checks the round trip field by field."""
        return {
            "KAFKA_BOOTSTRAP_SERVERS": self.bootstrap_servers,
            "CLICKHOUSE_URL": self.clickhouse_endpoint_url,
            "CLICKHOUSE_USER": self.clickhouse_user,
            "CLICKHOUSE_PASSWORD": self.clickhouse_password.get_secret_value(),
            "CLICKHOUSE_DATABASE": self.clickhouse_database,
            "CLICKHOUSE_READER_USER": self.clickhouse_reader_user,
            "CLICKHOUSE_READER_PASSWORD": self.clickhouse_reader_password.get_secret_value(),
            "GPULEDGER_TOPIC_PREFIX": self.topic_prefix,
            "GPULEDGER_HOME": str(self.home),
            "GPULEDGER_WINDOW_SECONDS": str(self.window_seconds),
            "GPULEDGER_ALLOWED_LATENESS_SECONDS": str(self.allowed_lateness_seconds),
            "GPULEDGER_FUTURE_TOLERANCE_SECONDS": str(self.future_tolerance_seconds),
            "GPULEDGER_STREAM_SESSION_TIMEOUT_SECONDS": str(self.stream_session_timeout_seconds),
            "GPULEDGER_METRICS_PORT": str(self.metrics_port),
            "GPULEDGER_METRICS_HOST": str(self.metrics_host),
            "KAFKA_SECURITY_PROTOCOL": self.kafka_security_protocol,
            "KAFKA_SASL_MECHANISM": self.kafka_sasl_mechanism or "",
            "KAFKA_SASL_USERNAME": self.kafka_sasl_username or "",
            "KAFKA_SASL_PASSWORD": self.kafka_sasl_password.get_secret_value() if self.kafka_sasl_password else "",
            "KAFKA_SSL_CAFILE": self.kafka_ssl_cafile or "",
        }

    def kafka_client_config(self) -> dict[str, object]:
        """Connection settings shared by kafka-python producers, consumers and admin clients."""
        config: dict[str, object] = {
            "bootstrap_servers": self.bootstrap_servers,
            "security_protocol": self.kafka_security_protocol,
            "reconnect_backoff_max_ms": RECONNECT_BACKOFF_MAX_MS,
        }
        if self.kafka_sasl_mechanism:
            config["sasl_mechanism"] = self.kafka_sasl_mechanism
            config["sasl_plain_username"] = self.kafka_sasl_username
            config["sasl_plain_password"] = (
                self.kafka_sasl_password.get_secret_value() if self.kafka_sasl_password else None
            )
        if self.kafka_ssl_cafile:
            config["ssl_cafile"] = self.kafka_ssl_cafile
        return config

    def librdkafka_config(self) -> dict[str, str | int]:
        """The same connection settings as ``kafka_client_config`` in librdkafka's names (the producer)."""
        config: dict[str, str | int] = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": self.kafka_security_protocol,
            "reconnect.backoff.max.ms": RECONNECT_BACKOFF_MAX_MS,
        }
        if self.kafka_sasl_mechanism:
            config["sasl.mechanism"] = self.kafka_sasl_mechanism
            config["sasl.username"] = self.kafka_sasl_username or ""
            config["sasl.password"] = self.kafka_sasl_password.get_secret_value() if self.kafka_sasl_password else ""
        if self.kafka_ssl_cafile:
            config["ssl.ca.location"] = self.kafka_ssl_cafile
        return config

    def faust_credentials(self) -> CredentialsT | None:
        """The same Kafka security for Faust (aiokafka) as ``kafka_client_config``: SASL (PLAIN /
        SCRAM), over SSL when asked, or SSL alone; None for PLAINTEXT."""
        protocol = self.kafka_security_protocol
        if protocol == "PLAINTEXT":
            return None
        import ssl

        import faust

        context = ssl.create_default_context(cafile=self.kafka_ssl_cafile) if protocol.endswith("SSL") else None
        if protocol.startswith("SASL"):
            password = self.kafka_sasl_password.get_secret_value() if self.kafka_sasl_password else None
            return faust.SASLCredentials(
                username=self.kafka_sasl_username,
                password=password,
                mechanism=self.kafka_sasl_mechanism or "PLAIN",
                ssl_context=context,
            )
        return faust.SSLCredentials(context)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read from the environment on first use."""
    return Settings()


def reset_settings() -> None:
    """Forget the cached settings (tests that change the environment call this)."""
    get_settings.cache_clear()
