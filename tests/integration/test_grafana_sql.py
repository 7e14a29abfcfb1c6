"""The Grafana dashboard's SQL against the real engine, as the read-only account Grafana signs in with.

A viewer can put any value into the ``cluster`` variable (``?var-cluster=…`` in the URL). Grafana
formats it with ``percentencode`` — JavaScript's ``encodeURIComponent`` with ``!'()*`` also
encoded; node runs exactly that here — and every panel must then see it as one quoted literal.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import clickhouse_connect
import pytest
from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import DatabaseError

from gpuledger.dashboard import grafana
from sql.migrate import migrate, reader_statements
from tests.integration._endpoint_process import EndpointProcess

pytestmark = pytest.mark.integration

WRITER, WRITER_PW, READER, READER_PW = "ledger", "writer-secret", "gpuledger_reader", "reader-secret"
HOSTILE = [
    "x' OR 1=1 --",
    "'; DROP TABLE benchmark_runs; --",
    "\\' OR 1=1 --",  # ends a literal Grafana's sqlstring made: ClickHouse reads \' as an escaped quote
    "a\\",
    "ü'\"`${x}%27",
    "*' OR '1'='1",
]
START_MS, END_MS = 1_790_000_000_000, 1_790_900_000_000  # 2026-09-21 .. 2026-10-02
# grafana-clickhouse-datasource (v4) expands the time macros to these
MACROS = {"$__fromTime": f"toDateTime(intDiv({START_MS},1000))", "$__toTime": f"toDateTime(intDiv({END_MS},1000))"}


def percentencode(values: list[str]) -> list[str]:
    script = (
        "const v = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "process.stdout.write(JSON.stringify(v.map(s => encodeURIComponent(s)"
        ".replace(/[!'()*]/g, c => '%' + c.charCodeAt(0).toString(16).toUpperCase()))));"
    )
    done = subprocess.run(
        ["node", "-e", script], input=json.dumps(values), capture_output=True, text=True, check=True, timeout=60
    )
    return list(json.loads(done.stdout))


def sqlstring(value: str) -> str:
    """Grafana's ``sqlstring`` format of one value: ' doubled, " backslash-escaped, nothing else."""
    return "'" + value.replace("'", "''").replace('"', '\\"') + "'"


def interpolate(sql: str, encoded_cluster: str) -> str:
    for macro, text in MACROS.items():
        sql = sql.replace(macro, text)
    return sql.replace("${cluster:percentencode}", encoded_cluster)


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EndpointProcess]:
    env = {k: v for k, v in os.environ.items() if "CLICKHOUSE" not in k}
    env.update({"CLICKHOUSE_USER": WRITER, "CLICKHOUSE_PASSWORD": WRITER_PW, "CLICKHOUSE_READER_PASSWORD": READER_PW})
    process = EndpointProcess(tmp_path_factory.mktemp("grafana") / "chdb", env=env)
    yield process
    process.stop()


def connect(endpoint: EndpointProcess, user: str, password: str) -> Client:
    port = int(endpoint.url.rsplit(":", 1)[1])
    return clickhouse_connect.get_client(
        host="127.0.0.1", port=port, username=user, password=password, database="gpuledger"
    )


@pytest.fixture(scope="module")
def clients(endpoint: EndpointProcess) -> Iterator[tuple[Client, Client]]:
    port = int(endpoint.url.rsplit(":", 1)[1])
    admin = clickhouse_connect.get_client(host="127.0.0.1", port=port, username=WRITER, password=WRITER_PW)
    admin.command("CREATE DATABASE IF NOT EXISTS gpuledger")
    writer = connect(endpoint, WRITER, WRITER_PW)
    migrate(admin, writer, "gpuledger")
    writer.command(
        "INSERT INTO benchmark_runs (event_id, time, cluster, run_id, collective, ranks, ok) VALUES "
        "('e1', '2026-09-25 00:00:00', 'east', 'r1', 'all_reduce', 16, true), "
        "('e2', '2026-09-26 00:00:00', 'west', 'r2', 'all_reduce', 16, true)"
    )
    reader = connect(endpoint, READER, READER_PW)
    yield writer, reader
    for client in (reader, writer, admin):
        client.close()


def panel_sql(title: str) -> str:
    board = grafana.dashboard()
    return str(next(p for p in board["panels"] if p["title"] == title)["targets"][0]["rawSql"])


def test_a_hostile_cluster_value_reaches_clickhouse_as_one_literal(clients: tuple[Client, Client]) -> None:
    _, reader = clients
    encoded = percentencode([*HOSTILE, grafana.ALL_CLUSTERS, "east"])
    for value, text in zip([*HOSTILE, grafana.ALL_CLUSTERS, "east"], encoded, strict=True):
        got = reader.query(f"SELECT {interpolate(grafana.CLUSTER, text)}").result_rows[0][0]
        assert got == ("" if value == grafana.ALL_CLUSTERS else value)


def test_every_panel_runs_read_only_and_filters_by_exactly_the_value(clients: tuple[Client, Client]) -> None:
    writer, reader = clients
    runs = "NCCL acceptance runs"
    for value, text in zip(HOSTILE, percentencode(HOSTILE), strict=True):
        for title, *_ in grafana.PANELS:
            reader.query(interpolate(panel_sql(title), text))  # parses and runs: the value stayed a literal
        assert reader.query(interpolate(panel_sql(runs), text)).result_rows == [], value
    assert writer.query("SELECT count() FROM benchmark_runs").result_rows[0][0] == 2  # nothing dropped
    every, east = percentencode([grafana.ALL_CLUSTERS, "east"])
    assert len(reader.query(interpolate(panel_sql(runs), every)).result_rows) == 2
    assert [r[0] for r in reader.query(interpolate(panel_sql(runs), east)).result_rows] == ["r1"]


def test_sqlstring_would_let_a_backslash_rewrite_the_query(clients: tuple[Client, Client]) -> None:
    """Why the dashboard does not use ${cluster:sqlstring}: ClickHouse's literals honour backslashes."""
    _, reader = clients
    value = "\\' OR 1=1 --"
    naive = f"SELECT count() FROM benchmark_runs WHERE cluster = {sqlstring(value)}\n"
    assert reader.query(naive).result_rows[0][0] == 2  # every cluster's rows: the filter was rewritten
    safe = "SELECT count() FROM benchmark_runs WHERE cluster = " + interpolate(
        grafana.CLUSTER, percentencode([value])[0]
    )
    assert reader.query(safe).result_rows[0][0] == 0


@pytest.mark.parametrize(
    "statement",
    [
        "DROP TABLE benchmark_runs",
        "INSERT INTO benchmark_runs (event_id, cluster) VALUES ('x', 'x')",
        "SELECT count() FROM file('/etc/passwd', 'LineAsString')",
        "SET readonly = 0",
        "CREATE TABLE stolen ENGINE = Memory AS SELECT 1",
    ],
)
def test_the_reader_cannot_write_change_settings_or_read_files(clients: tuple[Client, Client], statement: str) -> None:
    writer, reader = clients
    with pytest.raises(DatabaseError, match="readonly|READONLY|Code: 164"):
        reader.command(statement)
    assert writer.query("SELECT count() FROM benchmark_runs").result_rows[0][0] == 2


def test_accounts_need_their_own_passwords(endpoint: EndpointProcess) -> None:
    for user, password in ((READER, WRITER_PW), (READER, ""), (WRITER, READER_PW)):
        with pytest.raises(DatabaseError, match="516|Authentication failed"):
            connect(endpoint, user, password)
    assert READER_PW not in endpoint.output and WRITER_PW not in endpoint.output


def test_the_documented_reader_sql_parses(clients: tuple[Client, Client]) -> None:
    """sql/access/reader.sql is for ClickHouse servers (the embedded engine has no access storage):
    every statement must at least parse, with the password as one literal."""
    writer, _ = clients
    password = "p'w\\d"
    for statement in reader_statements("gpuledger_reader", password, "gpuledger"):
        formatted = writer.query("SELECT formatQuery({s:String})", parameters={"s": statement}).result_rows[0][0]
        assert "gpuledger_reader" in formatted
    create = reader_statements("gpuledger_reader", password, "gpuledger")[0]
    assert writer.query("SELECT formatQuery({s:String})", parameters={"s": create}).result_rows[0][0].count("'") >= 2


def test_the_dashboard_json_has_no_raw_variable_inside_quotes() -> None:
    text = (Path(__file__).resolve().parents[2] / "infra/grafana/gpuledger.json").read_text()
    assert "'${cluster}'" not in text and "${cluster:sqlstring}" not in text and "$cluster" not in text
    board = json.loads(text)
    names = {v["name"]: v for v in board["templating"]["list"]}
    assert names["datasource"]["type"] == "datasource" and names["cluster"]["type"] == "query"
    assert all(p["datasource"]["uid"] == "${datasource}" for p in board["panels"])
