"""Shared fixtures: where the real services are, and per-test isolation.

Service resolution, in order (never a silent skip — a test that cannot reach its services fails):
1. ``KAFKA_BOOTSTRAP_SERVERS`` / ``CLICKHOUSE_URL`` set → those servers.
2. a Docker engine answers → testcontainers (Kafka, ClickHouse server).
3. otherwise the local services of ``gpuledger up`` (started here if they are not running).

Each test that writes gets its own topic prefix and ClickHouse database (``isolated_settings``),
left in place afterwards so a failure can be inspected.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest
from pydantic import SecretStr

from pipelines.settings import Settings

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client


@dataclass(frozen=True)
class Endpoints:
    kafka_bootstrap: str
    clickhouse_url: str
    clickhouse_user: str
    clickhouse_password: str
    how: str  # "environment" | "testcontainers" | "local"


def _docker_answers() -> bool:
    if not os.environ.get("DOCKER_HOST") and not os.path.exists("/var/run/docker.sock"):
        return False
    try:
        import docker

        client = docker.from_env(timeout=2)
    except Exception:  # no engine, no socket, no permission: all mean "not available"
        return False
    try:
        client.ping()
        return True
    except Exception:
        return False
    finally:
        client.close()


def _from_testcontainers(stack: list[object]) -> Endpoints:  # pragma: no cover - needs Docker
    from testcontainers.clickhouse import ClickHouseContainer
    from testcontainers.kafka import KafkaContainer

    kafka = KafkaContainer().with_kraft()
    kafka.start()
    stack.append(kafka)
    ch = ClickHouseContainer()
    ch.start()
    stack.append(ch)
    url = f"http://{ch.get_container_host_ip()}:{ch.get_exposed_port(8123)}"
    return Endpoints(kafka.get_bootstrap_server(), url, ch.username, ch.password, "testcontainers")


def _local() -> Endpoints:
    from infra.services import up

    settings = Settings()
    try:
        up(settings, workers=0)
    except Exception as exc:
        pytest.fail(f"local services unavailable and could not be started: {exc}", pytrace=False)
    return Endpoints(
        settings.bootstrap_servers,
        settings.clickhouse_endpoint_url,
        settings.clickhouse_user,
        settings.clickhouse_password.get_secret_value(),
        "local",
    )


@pytest.fixture(scope="session")
def endpoints() -> Iterator[Endpoints]:
    stack: list[object] = []
    env_kafka = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    env_ch = os.environ.get("CLICKHOUSE_URL")
    if env_kafka or env_ch:
        base = Settings()
        local = None if (env_kafka and env_ch) else _local()
        yield Endpoints(
            env_kafka or (local.kafka_bootstrap if local else ""),
            env_ch or (local.clickhouse_url if local else ""),
            base.clickhouse_user,
            base.clickhouse_password.get_secret_value(),
            "environment",
        )
    elif _docker_answers():  # pragma: no cover - no Docker engine on the CI machines
        found = _from_testcontainers(stack)
        yield found
    else:
        yield _local()
    for container in reversed(stack):  # pragma: no cover
        container.stop()  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def clickhouse_url(endpoints: Endpoints) -> str:
    return endpoints.clickhouse_url


@pytest.fixture(scope="session")
def clickhouse_credentials(endpoints: Endpoints) -> tuple[str, str]:
    return endpoints.clickhouse_user, endpoints.clickhouse_password


@pytest.fixture(scope="session")
def kafka_bootstrap(endpoints: Endpoints) -> str:
    return endpoints.kafka_bootstrap


@pytest.fixture
def isolated_settings(endpoints: Endpoints, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """Settings with a fresh topic prefix and database for one test (topics/DB created lazily)."""
    return fresh_settings(endpoints, tmp_path_factory)


def fresh_settings(endpoints: Endpoints, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """Settings with a topic prefix, database and home of their own."""
    tag = uuid.uuid4().hex[:10]
    return Settings(
        kafka_bootstrap_servers=endpoints.kafka_bootstrap,
        clickhouse_url=endpoints.clickhouse_url,
        clickhouse_user=endpoints.clickhouse_user,
        clickhouse_password=SecretStr(endpoints.clickhouse_password),
        clickhouse_database=f"test_{tag}",
        topic_prefix=f"test-{tag}.",
        home=tmp_path_factory.mktemp(f"home-{tag}"),
    )


@pytest.fixture
def client(isolated_settings: Settings) -> Iterator[Client]:
    """A ClickHouse client on the isolated database, its migrations applied."""
    from infra.services import apply_migrations
    from sql.client import get_client

    apply_migrations(isolated_settings)
    c = get_client(isolated_settings)
    yield c
    c.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """In CI a skipped test is a failure: a suite that silently skips proves nothing."""
    report: pytest.TestReport = yield
    if os.environ.get("CI") and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped in CI (skips count as failures): {report.longrepr}"
    return report
