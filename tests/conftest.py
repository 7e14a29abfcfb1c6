"""Shared fixtures: where the real services are, and per-test isolation.

Service resolution, in order (never a silent skip — a test that cannot reach its services fails):
1. ``KAFKA_BOOTSTRAP_SERVERS`` / ``CLICKHOUSE_URL`` set → those servers.
2. a Docker engine answers → testcontainers (Kafka, ClickHouse server).
3. otherwise the local services of ``gpuledger up`` (started here if they are not running).

Each test that writes gets its own topic prefix and ClickHouse database (``isolated_settings``).
The database is dropped after a test that passed and left in place after one that failed, so the
failure can be inspected: every table of every database left behind costs the endpoint's
background pools CPU for the rest of the run (240 leftover test databases: 8 % of a core idle).
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


FAILED = pytest.StashKey[bool]()


@pytest.fixture
def isolated_settings(
    endpoints: Endpoints, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Settings]:
    """Settings with a fresh topic prefix and database for one test (topics/DB created lazily); the
    database is dropped after the test unless it failed."""
    settings = fresh_settings(endpoints, tmp_path_factory)
    yield settings
    if not request.node.stash.get(FAILED, False):
        drop_database(settings)


def drop_database(settings: Settings) -> None:
    """Drop a test's database, if it was created; best effort (a test may have stopped the endpoint)."""
    from sql.client import server_client

    try:
        client = server_client(settings)
    except Exception:
        return
    try:
        client.command(f"DROP DATABASE IF EXISTS `{settings.clickhouse_database}` SYNC")
    except Exception:
        pass
    finally:
        client.close()


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
    if report.failed:
        item.stash[FAILED] = True
    if os.environ.get("CI") and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped in CI (skips count as failures): {report.longrepr}"
    return report
