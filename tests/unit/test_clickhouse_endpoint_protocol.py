"""Pure parts of the embedded ClickHouse endpoint: SQL splitting, URL parameters, credentials,
status codes, content codings and request bodies (no engine, no sockets)."""

from __future__ import annotations

import base64
import gzip
import io
import json
import zlib
from pathlib import Path

import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from urllib3 import encode_multipart_formdata

from infra.clickhouse import codecs, payload, protocol, sqltext
from infra.clickhouse.errors import ClickHouseError, error_name, parse_engine_message

NATIVE_HEAD = b"INSERT INTO db.t (`a`, `b`) FORMAT Native\n"


@pytest.mark.parametrize(
    ("head", "complete", "expected"),
    [
        (NATIVE_HEAD + b"\x02\x03", False, ("INSERT INTO db.t (`a`, `b`)", "", "Native", len(NATIVE_HEAD))),
        (
            b"INSERT INTO t SETTINGS async_insert=0 FORMAT CSV \r\n1,2",
            False,
            ("INSERT INTO t", "SETTINGS async_insert=0", "CSV", 51),
        ),
        (
            b"insert into `format` (values, format) format TSV\n",
            True,
            ("insert into `format` (values, format)", "", "TSV", 49),
        ),
        (
            b'/* c */ INSERT INTO t FORMAT JSONEachRow {"a":1}',
            False,
            ("/* c */ INSERT INTO t", "", "JSONEachRow", 41),
        ),
        (
            b"INSERT INTO FUNCTION file('x.csv', 'CSV') FORMAT CSV\n",
            True,
            ("INSERT INTO FUNCTION file('x.csv', 'CSV')", "", "CSV", 53),
        ),
    ],
)
def test_split_insert_finds_data(head: bytes, complete: bool, expected: tuple[str, str, str, int]) -> None:
    split = sqltext.split_insert(head, complete)
    assert isinstance(split, sqltext.InsertSplit)
    assert (split.target, split.settings, split.fmt, split.data_offset) == expected


@pytest.mark.parametrize(
    ("head", "complete", "expected"),
    [
        (b"INSERT INTO t VALUES (1, 'FORMAT CSV')", False, "sql"),
        (b"INSERT INTO t SELECT * FROM numbers(3)", False, "sql"),
        (b"SELECT 1 FORMAT Native", False, "sql"),
        (b"INSERT INTO t FORMAT CSV;", True, "sql"),
        (b"INSERT INTO t FORMAT Nat", False, "more"),  # the name may continue in the next chunk
        (b"INSERT INTO t FORMAT Native  ", False, "more"),  # the newline may follow
        (b"INSERT INTO t (a, ", False, "more"),
        (b"INS", False, "more"),  # cut inside the first word
        (b"INSERT INTO t (a) FROM", False, "more"),  # "FROM" or the start of "FROMAGE"?
        (b"INSERT INTO t (a) FROM INFILE 'x' FORMAT CSV", False, "sql"),
        (b"  -- only a comment\n", False, "more"),
        (b"", True, "sql"),
    ],
)
def test_split_insert_other_outcomes(head: bytes, complete: bool, expected: str) -> None:
    assert sqltext.split_insert(head, complete) == expected


@pytest.mark.parametrize(
    ("sql", "kind", "fmt", "result"),
    [
        ("SELECT 1", "SELECT", None, True),
        ("select format('{}', 'FORMAT x') FORMAT JSONEachRow SETTINGS a = 1", "SELECT", "JSONEachRow", True),
        ("WITH 1 AS x SELECT x FORMAT `CSVWithNames`", "WITH", "CSVWithNames", True),
        ("-- lead\n(SELECT 1) FORMAT TSV", "(", "TSV", True),
        ("CREATE TABLE t (format String) ENGINE = Memory", "CREATE", None, False),
        ("SHOW TABLES", "SHOW", None, True),
        ("SELECT 'FORMAT JSON'", "SELECT", None, True),
        ("", "", None, False),
    ],
)
def test_statement_shape(sql: str, kind: str, fmt: str | None, result: bool) -> None:
    assert sqltext.statement_kind(sql) == kind
    assert sqltext.output_format(sql) == fmt
    assert sqltext.produces_result(sql) is result


def test_parse_params_sorts_transport_placeholders_and_settings() -> None:
    pairs = [
        ("query", "SELECT {x:UInt8}"),
        ("database", "db"),
        ("session_id", "s1"),
        ("session_timeout", "5"),
        ("param_x", "7"),
        ("max_threads", "1"),
        ("wait_end_of_query", "1"),
        ("max_threads", "2"),
        ("enable_http_compression", "1"),
        ("send_progress_in_http_headers", "1"),
        ("query_id", "q"),
    ]
    params = protocol.parse_params(pairs)
    assert (params.query, params.database, params.session_id, params.query_id) == (
        "SELECT {x:UInt8}",
        "db",
        "s1",
        "q",
    )
    assert params.session_timeout_s == 5.0 and params.enable_http_compression == "1"
    assert params.params == {"x": "7"}
    assert params.settings == {"max_threads": "2"}


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.mark.parametrize(
    ("headers", "params", "presented"),
    [
        ({"authorization": _basic("ledger", "p:w")}, {}, ("ledger", "p:w")),
        ({"x-clickhouse-user": "ledger", "x-clickhouse-key": "pw"}, {}, ("ledger", "pw")),
        ({}, {"user": "ledger", "password": "pw"}, ("ledger", "pw")),
        ({}, {}, ("default", "")),
        ({"authorization": "Basic !!!"}, {}, ("default", "")),  # undecodable: nobody
    ],
)
def test_presented_credentials(headers: dict[str, str], params: dict[str, str], presented: tuple[str, str]) -> None:
    assert protocol.presented_credentials(headers, params) == presented


def test_authenticate_only_when_a_password_is_configured() -> None:
    open_door = protocol.Credentials("default", "")
    protocol.authenticate(open_door, {}, {})
    guarded = protocol.Credentials("ledger", "pw")
    protocol.authenticate(guarded, {"x-clickhouse-user": "ledger", "x-clickhouse-key": "pw"}, {})
    refused: list[tuple[dict[str, str], dict[str, str]]] = [
        ({}, {}),
        ({}, {"user": "ledger", "password": "nope"}),
        ({}, {"password": "pw"}),
        ({"x-clickhouse-user": "ledger", "x-clickhouse-key": "PW"}, {}),
    ]
    for headers, params in refused:
        with pytest.raises(ClickHouseError) as caught:
            protocol.authenticate(guarded, headers, params)
        assert caught.value.code == 516 and protocol.http_status(516) == 403
    assert "pw" not in repr(guarded)


@pytest.mark.parametrize(
    ("code", "status"),
    [(62, 400), (60, 404), (81, 404), (115, 404), (516, 403), (194, 401), (48, 501), (241, 500), (1001, 500)],
)
def test_http_status(code: int, status: int) -> None:
    assert protocol.http_status(code) == status


@pytest.mark.parametrize(
    ("fmt", "ctype"),
    [
        ("TabSeparated", "text/tab-separated-values; charset=UTF-8"),
        ("CSVWithNames", "text/csv; charset=UTF-8; header=present"),
        ("JSON", "application/json; charset=UTF-8"),
        ("JSONEachRow", "application/x-ndjson; charset=UTF-8"),
        ("Native", "application/octet-stream"),
        ("Parquet", "application/octet-stream"),
        ("PrettyCompact", "text/plain; charset=UTF-8"),
    ],
)
def test_content_type(fmt: str, ctype: str) -> None:
    assert protocol.content_type(fmt) == ctype


def test_summary_header_writes_counters_as_strings() -> None:
    summary = json.loads(protocol.summary_header({"read_rows": 3, "written_bytes": 10, "elapsed_ns": 5}))
    assert summary["read_rows"] == "3" and summary["written_bytes"] == "10" and summary["result_rows"] == "0"
    assert set(summary) >= {"read_bytes", "total_rows_to_read", "result_bytes", "written_rows"}


@pytest.mark.parametrize(
    ("text", "code", "name"),
    [
        ("Code: 62. DB::Exception: Syntax error: failed at position 1. (SYNTAX_ERROR)", 62, "SYNTAX_ERROR"),
        ("Error: Code: 60. DB::Exception: Unknown table 'x'. (UNKNOWN_TABLE)\n", 60, "UNKNOWN_TABLE"),
        ("something else broke", 1001, "STD_EXCEPTION"),
    ],
)
def test_parse_engine_message(text: str, code: int, name: str) -> None:
    got_code, message = parse_engine_message(text)
    assert got_code == code and error_name(message) == name
    assert ClickHouseError(got_code, message).body("1.2").startswith(f"Code: {code}. DB::Exception: ")


@pytest.mark.parametrize(
    ("accept", "chosen"),
    [
        ("lz4,zstd,gzip,deflate", "lz4"),
        ("gzip, deflate, br", "gzip"),
        ("zstd;q=0, deflate", "deflate"),
        ("identity", None),
        (None, None),
    ],
)
def test_choose_encoding(accept: str | None, chosen: str | None) -> None:
    assert codecs.choose_encoding(accept) == chosen


COMPRESS = {
    "gzip": gzip.compress,
    "deflate": zlib.compress,
    "zstd": zstandard.ZstdCompressor().compress,
    "lz4": lz4.frame.compress,
}


@settings(max_examples=60, deadline=None)
@given(
    coding=st.sampled_from(sorted(COMPRESS)),
    blocks=st.lists(st.binary(min_size=1, max_size=300), min_size=1, max_size=4),
    step=st.integers(1, 97),
)
def test_decoder_reads_concatenated_frames_in_any_chunking(coding: str, blocks: list[bytes], step: int) -> None:
    # clickhouse-connect compresses every insert block as its own frame
    stream = b"".join(COMPRESS[coding](block) for block in blocks)
    decoder = codecs.decoder(coding)
    out = b"".join(decoder.feed(stream[i : i + step]) for i in range(0, len(stream), step)) + decoder.finish()
    assert out == b"".join(blocks)
    assert codecs.decoder(coding).feed(codecs.encode(out, coding)) == out


@pytest.mark.parametrize("coding", sorted(COMPRESS))
def test_decoder_garbage_is_cannot_decompress(coding: str) -> None:
    with pytest.raises(ClickHouseError) as caught:
        decoder = codecs.decoder(coding)
        decoder.feed(b"\x00not compressed at all, not even close\xff" * 3)
        decoder.finish()
    assert caught.value.code == 271


def test_unknown_content_encoding() -> None:
    with pytest.raises(ClickHouseError):
        codecs.decoder("snappy-ish")


def test_chunked_transfer_decoding() -> None:
    wire = b"5;ext=1\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nTrailer: x\r\n\r\nNEXT REQUEST"
    rfile = io.BytesIO(wire)
    assert b"".join(payload.raw_chunks(rfile, None, chunked=True)) == b"hello world"
    assert rfile.read() == b"NEXT REQUEST"  # the connection stays usable
    with pytest.raises(ClickHouseError):
        list(payload.raw_chunks(io.BytesIO(b"zz\r\n"), None, chunked=True))
    with pytest.raises(ClickHouseError):
        list(payload.raw_chunks(io.BytesIO(b"abc"), "10", chunked=False))


@settings(max_examples=80, deadline=None)
@given(data=st.binary(max_size=3000), cuts=st.lists(st.integers(0, 3100), max_size=6), in_url=st.booleans())
def test_insert_data_is_spooled_byte_exact_however_it_is_chunked(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, cuts: list[int], in_url: bool
) -> None:
    spool = tmp_path_factory.mktemp("spool")
    query = "INSERT INTO t (a) SETTINGS x = 1 FORMAT RowBinary"
    stream = data if in_url else query.encode() + b"\n" + data
    points = sorted({0, len(stream), *(c for c in cuts if c < len(stream))})
    chunks = [stream[a:b] for a, b in zip(points, points[1:], strict=False)]
    statement = payload.read_statement(query if in_url else None, chunks, spool)
    assert statement.data_path is not None
    assert statement.data_path.read_bytes() == data
    assert statement.sql == f"INSERT INTO t (a) FROM INFILE '{statement.data_path}' SETTINGS x = 1 FORMAT RowBinary"
    statement.discard()
    assert list(spool.iterdir()) == []


def test_plain_statements_are_not_spooled(tmp_path: Path) -> None:
    statement = payload.read_statement("SELECT 1,", [b" 2 ", b"FORMAT JSON"], tmp_path)
    assert (statement.sql, statement.data_path) == ("SELECT 1,\n 2 FORMAT JSON", None)
    with pytest.raises(ClickHouseError) as caught:
        payload.read_statement(None, [b"  \n"], tmp_path)
    assert caught.value.code == 62


def test_form_fields_and_external_data() -> None:
    body, ctype = encode_multipart_formdata({"query": "SELECT {p:String}", "param_p": "ü" * 3})
    assert payload.form_fields(ctype, body) == [("query", "SELECT {p:String}"), ("param_p", "ü" * 3)]
    body, ctype = encode_multipart_formdata({"query": "SELECT 1", "ext": ("ext.csv", b"1,2", "text/csv")})
    with pytest.raises(ClickHouseError) as caught:
        payload.form_fields(ctype, body)
    assert caught.value.code == 48
