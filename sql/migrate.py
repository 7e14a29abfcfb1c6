"""Apply ``sql/ddl/NNNN_*.sql`` idempotently, recording each in ``schema_migrations``.

Every DDL statement is itself idempotent (``IF NOT EXISTS``), so a migration interrupted half-way
is simply applied again. A recorded migration whose file changed is reported, not re-applied:
schema changes go into a new numbered file.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass

from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import DatabaseError

from pipelines.settings import Settings
from sql import SQL_DIR, ddl_files, split_statements
from sql.client import get_client, server_client
from sql.errors import describe

MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations
(
    version UInt32,
    name String,
    checksum String,
    applied_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(applied_at)
-- one row per migration version; replays of `migrate` collapse on it
ORDER BY version
"""


@dataclass
class MigrationReport:
    applied: list[str]
    already: list[str]
    changed: list[str]
    reader: str = ""  # what became of the read-only account (empty: not asked for)


# a MergeTree-family engine clause; group 2 is the family prefix (Replacing, Aggregating, ...)
_ENGINE = re.compile(r"\bENGINE\s*=\s*(Replicated)?(\w*)MergeTree\b", re.IGNORECASE)


def database_statement(database: str, cluster: str = "") -> str:
    """``CREATE DATABASE`` for one server, or — with ``cluster`` — a Replicated database on every
    replica of that cluster: its DDL (every migration, view and mutation) then reaches all replicas
    through Keeper without an ``ON CLUSTER`` clause per statement."""
    if not cluster:
        return f"CREATE DATABASE IF NOT EXISTS {_ident(database)}"
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", cluster):
        raise ValueError(f"invalid cluster name {cluster!r}")
    return (
        f"CREATE DATABASE IF NOT EXISTS {_ident(database)} ON CLUSTER `{cluster}` "
        f"ENGINE = Replicated('/clickhouse/databases/{database}', '{{shard}}', '{{replica}}')"
    )


def for_cluster(statement: str, cluster: str) -> str:
    """A DDL statement as it runs in a Replicated database: every MergeTree-family engine becomes
    its ``Replicated*`` twin with the same arguments (Keeper path and replica name come from the
    database); unchanged without ``cluster``. ClickHouse Cloud needs neither: it makes every
    MergeTree table a shared one by itself."""
    if not cluster:
        return statement
    return _ENGINE.sub(lambda m: f"ENGINE = Replicated{m.group(2)}MergeTree", statement)


def migrate(admin: Client, client: Client, database: str, cluster: str = "") -> MigrationReport:
    """Create ``database`` if needed and apply pending migrations through ``client`` (bound to it);
    with ``cluster``, as a Replicated database on that ClickHouse cluster (:func:`database_statement`)."""
    admin.command(database_statement(database, cluster))
    client.command(for_cluster(MIGRATIONS_TABLE, cluster))
    done = {
        int(row[0]): str(row[1])
        for row in client.query(
            "SELECT version, argMax(checksum, applied_at) FROM schema_migrations GROUP BY version"
        ).result_rows
    }
    report = MigrationReport([], [], [])
    for path in ddl_files():
        version = int(path.name[:4])
        text = path.read_text()
        checksum = hashlib.sha256(text.encode()).hexdigest()
        if version in done:
            (report.already if done[version] == checksum else report.changed).append(path.name)
            continue
        for statement in split_statements(text):
            client.command(for_cluster(statement, cluster))
        client.insert(
            "schema_migrations", [[version, path.stem, checksum]], column_names=["version", "name", "checksum"]
        )
        report.applied.append(path.name)
    return report


def reader_statements(reader: str, password: str, database: str) -> list[str]:
    """``sql/access/reader.sql`` with its placeholders replaced (quoted as identifiers and a literal)."""
    text = (SQL_DIR / "access" / "reader.sql").read_text()
    password_literal = "'" + password.replace("\\", "\\\\").replace("'", "\\'") + "'"
    text = text.replace("<reader>", _quoted(reader)).replace("<database>", _quoted(database))
    return [statement.replace("<password>", password_literal) for statement in split_statements(text)]


def ensure_reader(admin: Client, reader: str, password: str, database: str) -> None:
    """Create or update the read-only account (raises the server's error when not allowed)."""
    for statement in reader_statements(reader, password, database):
        admin.command(statement)


def _quoted(name: str) -> str:
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"


def _ident(name: str) -> str:
    if not name.replace("_", "").isalnum():
        raise ValueError(f"invalid database name {name!r}")
    return f"`{name}`"


def apply(settings: Settings, after: Callable[[Client, MigrationReport], None] | None = None) -> MigrationReport:
    """Create the configured database, apply the pending migrations, run ``after`` (the backfills an
    upgrade needs, from the floor that owns them) and ensure the read-only account."""
    admin = server_client(settings)
    admin.command(database_statement(settings.clickhouse_database, settings.clickhouse_cluster))
    client = get_client(settings)
    try:
        report = migrate(admin, client, settings.clickhouse_database, settings.clickhouse_cluster)
        if after is not None:
            after(client, report)
        report.reader = _reader_account(admin, settings)
        return report
    finally:
        client.close()
        admin.close()


def _reader_account(admin: Client, settings: Settings) -> str:
    """Create or update the read-only account on a ClickHouse server (the embedded endpoint has it built in)."""
    password = settings.clickhouse_reader_password.get_secret_value()
    if not settings.clickhouse_url or not password:
        return ""
    user = settings.clickhouse_reader_user
    try:
        ensure_reader(admin, user, password, settings.clickhouse_database)
    except DatabaseError as exc:
        return (
            f"read-only account {user} not created ({describe(exc)}); an administrator applies "
            "sql/access/reader.sql (the embedded endpoint needs none)"
        )
    return f"read-only account {user} ready (SELECT on {settings.clickhouse_database})"
