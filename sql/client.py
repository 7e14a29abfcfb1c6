"""The one way gpuledger talks to ClickHouse: clickhouse-connect over HTTP.

Locally that is the embedded chdb endpoint (``infra/clickhouse``); in production a ClickHouse
server or cloud service (``CLICKHOUSE_URL``, user and password from the environment).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from pipelines.settings import Settings

if TYPE_CHECKING:  # clickhouse-connect is an extra: a collector-only install imports this module too
    from clickhouse_connect.driver.client import Client


def get_client(settings: Settings, database: str | None = None, *, reader: bool = False, **kwargs: Any) -> Client:
    """A client bound to ``database`` (default: the configured one, created by migrations).

    ``reader``: as the read-only account (``CLICKHOUSE_READER_USER``/``_PASSWORD``) that Grafana and
    ``gpuledger serve`` use; ``gpuledger migrate`` creates it (``sql/access/reader.sql``).
    """
    user, password = settings.clickhouse_user, settings.clickhouse_password
    if reader:
        user, password = settings.clickhouse_reader_user, settings.clickhouse_reader_password
    import clickhouse_connect

    url = urlparse(settings.clickhouse_endpoint_url)
    secure = url.scheme == "https"
    port = url.port or (8443 if secure else 8123)
    return clickhouse_connect.get_client(
        host=url.hostname,
        port=port,
        secure=secure,
        username=user,
        password=password.get_secret_value(),
        database=database if database is not None else settings.clickhouse_database,
        connect_timeout=10,
        send_receive_timeout=300,
        **kwargs,
    )


def server_client(settings: Settings) -> Client:
    """A client on the server's default database (for CREATE DATABASE and health checks)."""
    return get_client(settings, database="default")
