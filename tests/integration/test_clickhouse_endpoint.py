"""The ClickHouse endpoint through clickhouse-connect, exactly as the pipeline uses it.

Runs against ``clickhouse_url`` (the local embedded endpoint, or a real ClickHouse server when
CLICKHOUSE_URL is set); every test works in one fresh database of this module. Tests about the
endpoint process itself (credentials, loopback binding, clean shutdown) start private endpoints.
"""

from __future__ import annotations

import contextlib
import gzip
import random
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import clickhouse_connect
import lz4.frame
import pyarrow as pa
import pytest
import zstandard
from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import DatabaseError

from tests.integration._endpoint_process import EndpointProcess

pytestmark = pytest.mark.integration

ClientFactory = Callable[..., Client]


def make_client(url: str, user: str, password: str, **kwargs: Any) -> Client:
    parts = urlsplit(url)
    secure = parts.scheme == "https"
    return clickhouse_connect.get_client(
        interface=parts.scheme,
        host=parts.hostname,
        port=parts.port or (8443 if secure else 8123),
        username=user,
        password=password,
        **kwargs,
    )


def http(
    url: str,
    path: str = "/",
    params: dict[str, str] | None = None,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    auth: tuple[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """A bare HTTP request (no client library): status, headers, raw body."""
    target = url.rstrip("/") + path + ("?" + urlencode(params) if params else "")
    all_headers = dict(headers or {})
    if auth is not None:
        all_headers["X-ClickHouse-User"], all_headers["X-ClickHouse-Key"] = auth
    request = urllib.request.Request(target, data=body, headers=all_headers, method="POST" if body else "GET")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - test URL
            return response.status, dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers.items()), exc.read()


@pytest.fixture(scope="module")
def database(
    request: pytest.FixtureRequest, clickhouse_url: str, clickhouse_credentials: tuple[str, str]
) -> Iterator[str]:
    """A fresh database; kept for inspection when a test of this module failed."""
    name = f"test_endpoint_{datetime.now(UTC):%Y%m%d_%H%M%S}_{uuid.uuid4().hex[:6]}"
    admin = make_client(clickhouse_url, *clickhouse_credentials)
    admin.command(f"CREATE DATABASE {name}")
    failed_before = request.session.testsfailed
    yield name
    if request.session.testsfailed == failed_before:
        admin.command(f"DROP DATABASE IF EXISTS {name}")
    admin.close()


@pytest.fixture(scope="module")
def connect(clickhouse_url: str, clickhouse_credentials: tuple[str, str], database: str) -> Iterator[ClientFactory]:
    """Makes clients bound to the module's database; closes them at the end."""
    made: list[Client] = []

    def factory(**kwargs: Any) -> Client:
        client = make_client(clickhouse_url, *clickhouse_credentials, database=database, **kwargs)
        made.append(client)
        return client

    yield factory
    for client in made:
        client.close()


@pytest.fixture(scope="module")
def client(connect: ClientFactory) -> Client:
    return connect()


# --- the basics -------------------------------------------------------------------------------


def test_ping_and_root_answer_ok(clickhouse_url: str) -> None:
    assert http(clickhouse_url, "/ping")[::2] == (200, b"Ok.\n")
    assert http(clickhouse_url, "/")[::2] == (200, b"Ok.\n")


def test_connect_reads_version_and_timezone(client: Client) -> None:
    answer = client.command("SELECT version(), timezone()")
    assert isinstance(answer, list) and len(answer) == 2
    version, timezone = answer
    assert client.server_version == version and version.split(".")[0].isdigit()
    assert timezone and client.server_settings["max_block_size"].value.isdigit()


TYPED_DDL = """
CREATE TABLE {db}.typed (
    id UInt32, label LowCardinality(String), reading Nullable(Float64), at DateTime64(3, 'UTC'),
    amount Decimal(18, 6), counts Array(UInt32), costs Map(String, Float64)
) ENGINE = MergeTree ORDER BY id
"""


def typed_rows(n: int, seed: int = 7) -> list[list[Any]]:
    rnd = random.Random(seed)
    start = datetime(2024, 2, 28, 23, 59, 58, tzinfo=UTC)
    labels = ["a100", "h100", "mig-1g.10gb", "ünïcødé", "tab\tand\nnewline", "quote's", ""]
    rows = []
    for i in range(n):
        reading = None if i % 11 == 0 else rnd.uniform(-1e6, 1e6)
        at = start + timedelta(milliseconds=i * 1037)
        amount = Decimal(rnd.randrange(-(10**15), 10**15)) / Decimal(10**6)
        counts = [rnd.randrange(0, 2**32) for _ in range(i % 4)]
        costs = {f"k{j}": rnd.uniform(0, 100) for j in range(i % 3)}
        rows.append([i, labels[i % len(labels)], reading, at, amount, counts, costs])
    return rows


def test_100k_typed_rows_round_trip_exactly(client: Client, database: str) -> None:
    client.command(TYPED_DDL.format(db=database))
    rows = typed_rows(100_000)
    summary = client.insert("typed", rows, column_names=["id", "label", "reading", "at", "amount", "counts", "costs"])
    assert summary.written_rows == 100_000
    back = client.query("SELECT * FROM typed ORDER BY id").result_rows
    assert len(back) == len(rows)
    for sent, got in zip(rows, back, strict=True):
        assert got[0:3] == tuple(sent[0:3])
        assert got[3].replace(tzinfo=UTC) == sent[3]
        assert got[4:] == tuple(sent[4:])
    # the server agrees with the client's view, independent of result decoding
    stats = client.query(
        "SELECT countIf(reading IS NULL), sum(amount), sum(length(counts)), "
        "sum(length(mapKeys(costs))), uniqExact(label) FROM typed"
    ).result_rows[0]
    assert stats == (
        sum(r[2] is None for r in rows),
        sum(r[4] for r in rows),
        sum(len(r[5]) for r in rows),
        sum(len(r[6]) for r in rows),
        7,
    )


def test_server_side_parameters(client: Client) -> None:
    tricky = "tab\tquote'back\\slash\nünï"
    result = client.query(
        "SELECT {x:UInt32} + 1, {s:String}, length({s:String}), arraySum({a:Array(UInt32)}), {d:DateTime64(3, 'UTC')}",
        parameters={"x": 41, "s": tricky, "a": [1, 2, 3], "d": datetime(2024, 1, 2, 3, 4, 5, 678000)},
    ).result_rows[0]
    assert result[:4] == (42, tricky, len(tricky.encode()), 6)
    assert result[4].replace(tzinfo=None) == datetime(2024, 1, 2, 3, 4, 5, 678000)


def test_server_side_parameters_filter_a_table(client: Client, database: str) -> None:
    client.command(f"CREATE TABLE {database}.params (id UInt32, name String) ENGINE = Memory")
    client.insert("params", [[i, f"n{i}"] for i in range(100)], column_names=["id", "name"])
    rows = client.query(
        "SELECT id FROM params WHERE id >= {lo:UInt32} AND name != {skip:String} ORDER BY id",
        parameters={"lo": 95, "skip": "n97"},
    ).result_rows
    assert rows == [(95,), (96,), (98,), (99,)]
    many = {f"p{i}": "x" * 200 for i in range(60)}  # too long for a URL: sent as multipart/form-data
    expr = " || ".join(f"{{p{i}:String}}" for i in range(60))
    assert client.query(f"SELECT length({expr})", parameters=many).result_rows == [(60 * 200,)]


@pytest.mark.parametrize(
    ("sql", "code"),
    [
        ("SELEC 1", 62),
        ("SELECT * FROM no_such_table_for_endpoint_test", 60),
        ("SELECT no_such_function_for_endpoint_test(1)", 46),
        ("SELECT * FROM no_such_database_for_endpoint_test.t", 81),
    ],
)
def test_errors_carry_the_clickhouse_code(client: Client, sql: str, code: int) -> None:
    with pytest.raises(DatabaseError) as caught:
        client.query(sql)
    assert caught.value.code == code
    assert f"Code: {code}" in str(caught.value)
    assert client.command("SELECT 1") == 1  # the connection and session are still usable


def test_error_over_plain_http_has_code_header(clickhouse_url: str, clickhouse_credentials: tuple[str, str]) -> None:
    status, headers, body = http(clickhouse_url, body=b"SELEC 1", auth=clickhouse_credentials)
    assert status >= 400 and headers["X-ClickHouse-Exception-Code"] == "62"
    assert body.startswith(b"Code: 62. DB::Exception:")


# --- concurrency, volume, compression, settings ----------------------------------------------


def test_two_clients_at_once(connect: ClientFactory, database: str) -> None:
    writer, reader = connect(), connect()
    writer.command(f"CREATE TABLE {database}.concurrent (batch UInt32, n UInt32) ENGINE = MergeTree ORDER BY batch")
    start = threading.Barrier(2)
    errors: list[BaseException] = []
    sums: list[int] = []

    def write() -> None:
        start.wait()
        for batch in range(20):
            writer.insert("concurrent", [[batch, i] for i in range(500)], column_names=["batch", "n"])

    def read() -> None:
        start.wait()
        for _ in range(40):
            sums.append(reader.query("SELECT sum(number) FROM numbers(200000)").result_rows[0][0])

    def guarded(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # collected and asserted below
                errors.append(exc)

        return run

    threads = [threading.Thread(target=guarded(fn)) for fn in (write, read)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert sums == [199999 * 200000 // 2] * 40
    assert writer.query("SELECT count(), uniqExact(batch) FROM concurrent").result_rows == [(20 * 500, 20)]


def test_50_mb_insert(client: Client, database: str) -> None:
    n = 1_000_000
    ids = pa.array(range(n), type=pa.uint64())
    values = pa.array([float(i % 1000) for i in range(n)], type=pa.float64())
    names = pa.array([f"gpu-{i:012d}-{i % 97:04d}-abcdefghijklmnop" for i in range(n)], type=pa.string())
    table = pa.table({"id": ids, "value": values, "name": names})
    assert table.nbytes > 50_000_000
    client.command(
        f"CREATE TABLE {database}.big (id UInt64, value Float64, name String) ENGINE = MergeTree ORDER BY id"
    )
    client.insert_arrow("big", table)
    count, id_sum, value_sum, name_bytes = client.query(
        "SELECT count(), sum(id), sum(value), sum(length(name)) FROM big"
    ).result_rows[0]
    assert (count, id_sum, value_sum) == (n, n * (n - 1) // 2, float(sum(i % 1000 for i in range(n))))
    assert name_bytes == sum(len(s) for s in names.to_pylist())
    client.command(f"DROP TABLE {database}.big")


@pytest.mark.parametrize("compress", [True, False, "gzip", "zstd", "lz4"])
def test_compression_on_and_off(connect: ClientFactory, database: str, compress: bool | str) -> None:
    table = f"comp_{str(compress).lower()}"
    client = connect(compress=compress)
    client.command(f"CREATE TABLE {database}.{table} (id UInt32, text String) ENGINE = Memory")
    rows = [[i, f"row {i} " * (i % 7)] for i in range(20_000)]
    client.insert(table, rows, column_names=["id", "text"])
    assert client.query(f"SELECT * FROM {table} ORDER BY id").result_rows == [tuple(r) for r in rows]


_DECODE = {
    "gzip": gzip.decompress,
    "zstd": lambda b: zstandard.ZstdDecompressor().decompressobj().decompress(b),
    "lz4": lz4.frame.decompress,
}


@pytest.mark.parametrize("coding", sorted(_DECODE))
def test_http_compression_both_ways(
    clickhouse_url: str, clickhouse_credentials: tuple[str, str], database: str, coding: str
) -> None:
    sql = "SELECT number, toString(number) FROM system.numbers LIMIT 5000 FORMAT TabSeparated"
    expected = "".join(f"{i}\t{i}\n" for i in range(5000)).encode()
    status, headers, body = http(
        clickhouse_url,
        params={"enable_http_compression": "1"},
        body=sql.encode(),
        headers={"Accept-Encoding": coding},
        auth=clickhouse_credentials,
    )
    assert status == 200 and headers.get("Content-Encoding") == coding
    assert _DECODE[coding](body) == expected
    plain = http(clickhouse_url, body=sql.encode(), auth=clickhouse_credentials)
    assert plain[0] == 200 and "Content-Encoding" not in plain[1] and plain[2] == expected
    table = f"{database}.http_{coding}"
    http(
        clickhouse_url,
        body=f"CREATE TABLE {table} (a UInt32, b String) ENGINE = Memory".encode(),
        auth=clickhouse_credentials,
    )
    data = f"INSERT INTO {table} FORMAT TabSeparated\n".encode() + expected
    encoded = {"gzip": gzip.compress, "zstd": zstandard.ZstdCompressor().compress, "lz4": lz4.frame.compress}[coding](
        data
    )
    status, _, body = http(
        clickhouse_url, body=encoded, headers={"Content-Encoding": coding}, auth=clickhouse_credentials
    )
    assert status == 200, body
    count = http(clickhouse_url, body=f"SELECT count(), sum(a) FROM {table}".encode(), auth=clickhouse_credentials)
    assert count[2] == f"5000\t{sum(range(5000))}\n".encode()


def test_settings_apply_to_one_query_only(connect: ClientFactory) -> None:
    client = connect()
    assert client.query("SELECT getSetting('max_threads')", settings={"max_threads": 1}).result_rows == [(1,)]
    baseline = client.command("SELECT getSetting('max_block_size')")
    assert client.command("SELECT getSetting('max_block_size')", settings={"max_block_size": 4321}) == 4321
    assert client.command("SELECT getSetting('max_block_size')") == baseline != 4321
    other = connect()
    assert other.command("SELECT getSetting('max_block_size')") == baseline


def test_session_set_persists_and_url_settings_do_not_overwrite_it(connect: ClientFactory) -> None:
    client, other = connect(), connect()
    client.command("SET max_block_size = 777")
    assert client.command("SELECT getSetting('max_block_size')") == 777
    assert client.command("SELECT getSetting('max_block_size')", settings={"max_block_size": 4321}) == 4321
    assert client.command("SELECT getSetting('max_block_size')") == 777
    assert other.command("SELECT getSetting('max_block_size')") != 777


def test_database_parameter_is_per_request(
    clickhouse_url: str, clickhouse_credentials: tuple[str, str], database: str
) -> None:
    plain = make_client(clickhouse_url, *clickhouse_credentials)
    own = plain.command("SELECT currentDatabase()")
    assert own != database
    assert plain.command("SELECT currentDatabase()", settings={"database": database}) == database
    scoped = make_client(clickhouse_url, *clickhouse_credentials, database=database)
    assert scoped.command("SELECT currentDatabase()") == database
    assert plain.command("SELECT currentDatabase()") == own
    plain.close()
    scoped.close()


# --- the endpoint process itself --------------------------------------------------------------

SECRET = "s3cret-for-endpoint-test"


@pytest.fixture(scope="module")
def guarded_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EndpointProcess]:
    """A private endpoint whose environment sets a user and password."""
    env = {k: v for k, v in __import__("os").environ.items() if "CLICKHOUSE" not in k}
    env.update({"CLICKHOUSE_USER": "ledger", "CLICKHOUSE_PASSWORD": SECRET})
    endpoint = EndpointProcess(tmp_path_factory.mktemp("guarded"), env=env, args=("--log-level", "debug"))
    yield endpoint
    endpoint.stop()


def test_the_engine_reads_its_allocator_statistics_every_two_seconds(guarded_endpoint: EndpointProcess) -> None:
    """The embedded engine's memory worker runs every 2 s instead of every 100 ms (an idle endpoint's
    largest background cost)."""
    client = make_client(guarded_endpoint.url, "ledger", SECRET)
    rows = client.query("SELECT name, value FROM system.server_settings WHERE changed").result_rows
    client.close()
    assert ("memory_worker_period_ms", "2000") in rows


def test_a_table_without_merges_to_do_is_not_looked_at_again_at_once(tmp_path: Path) -> None:
    """After a look for merges that found nothing, a table's background job waits 5 s before the
    next (the engine's default, 0.1 s growing 1.1 times per look, costs an endpoint with about 40
    tables per database more CPU than its queries); an insert still starts a look at once."""
    endpoint = EndpointProcess(tmp_path)  # its own engine: the looks of no other test's tables count
    client = make_client(endpoint.url, "default", "")

    def looks() -> int:
        return int(
            client.query(
                "SELECT value FROM system.events WHERE event = 'MergerMutatorRangesForMergeCount'"
            ).result_rows[0][0]
        )

    try:
        client.command("CREATE TABLE quiet (a UInt32) ENGINE = ReplacingMergeTree ORDER BY a")
        client.command("INSERT INTO quiet VALUES (1)")
        time.sleep(1)
        before = looks()
        assert before >= 1  # the insert's look
        time.sleep(3)
        assert looks() == before  # the default looks about 6 more times in 3 s
    finally:
        client.close()
        endpoint.stop()


def test_tables_unused_by_streaming_queries_are_not_looked_at_for_them_ten_times_a_second(tmp_path: Path) -> None:
    """Each MergeTree table also has a background job for the engine's streaming queries (its
    ``STREAM`` clause, which the deployment does not use); after a look that found nothing it looks
    again after 0.1 s growing 1.1 times per look, 2–3 times a second per table in its first minutes,
    the largest part of an endpoint's CPU with no queries after a database is created. The endpoint
    starts those looks at 60 s."""
    endpoint = EndpointProcess(tmp_path)
    client = make_client(endpoint.url, "default", "")
    try:
        for i in range(20):
            client.command(f"CREATE TABLE quiet_{i} (a UInt32) ENGINE = MergeTree ORDER BY a")
        time.sleep(2)  # each table's first look, at once
        before = _thread_wakeups(endpoint.proc.pid, "BgStrmSchPool")
        time.sleep(3)
        assert _thread_wakeups(endpoint.proc.pid, "BgStrmSchPool") - before <= 5  # the default: about 150
    finally:
        client.close()
        endpoint.stop()


def _thread_wakeups(pid: int, prefix: str) -> int:
    """How often the process's threads whose name starts with ``prefix`` ran."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            if (task / "comm").read_text().strip().startswith(prefix):
                total += int((task / "schedstat").read_text().split()[2])
    return total


def test_an_idle_endpoint_process_does_not_wake_up_to_poll(tmp_path: Path) -> None:
    """Between requests the endpoint's Python threads sleep until a connection or a stop arrives: on
    this kind of machine each wake-up costs 0.1–0.3 ms of CPU, and a server loop polling every 0.2 s
    plus a main thread polling every 0.5 s cost an idle endpoint about 0.2 % of a core. A stop is
    still answered at once."""
    endpoint = EndpointProcess(tmp_path)
    try:
        client = make_client(endpoint.url, "default", "")
        assert client.command("SELECT 1") == 1
        client.close()
        time.sleep(1)
        before = _thread_wakeups(endpoint.proc.pid, "python")  # the engine's own threads carry their pool's name
        time.sleep(4)
        assert _thread_wakeups(endpoint.proc.pid, "python") - before <= 4  # polling: about 28
    finally:
        began = time.monotonic()
        assert endpoint.stop() == 0
    assert time.monotonic() - began < 5


@pytest.mark.parametrize(("user", "password"), [("ledger", "wrong"), ("default", SECRET), ("default", "")])
def test_wrong_credentials_are_refused(guarded_endpoint: EndpointProcess, user: str, password: str) -> None:
    with pytest.raises(DatabaseError) as caught:
        make_client(guarded_endpoint.url, user, password)
    assert caught.value.code == 516
    status, headers, _ = http(guarded_endpoint.url, params={"query": "SELECT 1"}, auth=(user, password))
    assert status in (401, 403) and headers["X-ClickHouse-Exception-Code"] == "516"


def test_right_credentials_work_every_way(guarded_endpoint: EndpointProcess) -> None:
    client = make_client(guarded_endpoint.url, "ledger", SECRET)
    client.command("CREATE TABLE auth_ok (a UInt8) ENGINE = Memory")
    client.insert("auth_ok", [[1], [2]], column_names=["a"])
    assert client.command("SELECT sum(a) FROM auth_ok") == 3
    client.close()
    assert http(guarded_endpoint.url, params={"query": "SELECT 2"}, auth=("ledger", SECRET))[::2] == (
        200,
        b"2\n",
    )
    url_auth = {"query": "SELECT 3", "user": "ledger", "password": SECRET}
    assert http(guarded_endpoint.url, params=url_auth)[::2] == (200, b"3\n")
    assert http(guarded_endpoint.url, "/ping")[::2] == (200, b"Ok.\n")  # health needs no credentials
    assert SECRET not in guarded_endpoint.output  # even with debug logging


def test_binds_loopback_by_default(guarded_endpoint: EndpointProcess) -> None:
    host_port = urlsplit(guarded_endpoint.url)
    assert host_port.hostname == "127.0.0.1"
    listening = {
        line.split()[1]
        for path in ("/proc/net/tcp", "/proc/net/tcp6")
        if Path(path).exists()
        for line in Path(path).read_text().splitlines()[1:]
        if line.split()[3] == "0A"
    }
    port_hex = f"{host_port.port:04X}"
    assert f"0100007F:{port_hex}" in listening
    assert not any(addr.endswith(f":{port_hex}") and not addr.startswith("0100007F") for addr in listening)


def test_sigterm_flushes_and_data_survives_restart(tmp_path: Path) -> None:
    endpoint = EndpointProcess(tmp_path)
    client = make_client(endpoint.url, "default", "")
    client.command("CREATE TABLE kept (a UInt32) ENGINE = MergeTree ORDER BY a")
    client.insert("kept", [[i] for i in range(1000)], column_names=["a"])
    client.close()
    assert endpoint.stop() == 0
    again = EndpointProcess(tmp_path)
    try:
        client = make_client(again.url, "default", "")
        assert client.command("SELECT count(), sum(a) FROM kept") == [str(1000), str(sum(range(1000)))]
        client.close()
    finally:
        assert again.stop() == 0
