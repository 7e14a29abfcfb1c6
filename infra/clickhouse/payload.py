"""Request bodies: read them (Content-Length or chunked), decode them, and turn query text plus body
into one statement for the engine.

As in ClickHouse, the SQL is the ``query`` URL parameter followed by a newline and the body. When
that stream is ``INSERT ... FORMAT <name>`` followed by data, the data is written straight to a
spool file as it arrives (never held in memory) and the statement becomes
``INSERT ... FROM INFILE '<spool>' FORMAT <name>``: the engine parses the data with the table's
own column types, exactly as it would parse it inline. Everything else is one SQL text.
"""

from __future__ import annotations

import contextlib
import email.parser
import email.policy
import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from infra.clickhouse import sqltext
from infra.clickhouse.codecs import Decoder
from infra.clickhouse.errors import BAD_ARGUMENTS, NOT_IMPLEMENTED, SYNTAX_ERROR, ClickHouseError

READ_CHUNK = 1 << 20
HEAD_LIMIT = 1 << 20  # an INSERT whose FORMAT clause is not within this many bytes is passed on as SQL
MAX_SQL_BYTES = 512 << 20


class Readable(Protocol):
    def read(self, size: int, /) -> bytes: ...

    def readline(self, size: int, /) -> bytes: ...


def raw_chunks(rfile: Readable, content_length: str | None, chunked: bool) -> Iterator[bytes]:
    """The body as sent (still content-encoded): chunked transfer coding or Content-Length bytes."""
    if chunked:
        yield from _chunked(rfile)
        return
    remaining = int(content_length or 0)
    while remaining > 0:
        data = rfile.read(min(READ_CHUNK, remaining))
        if not data:
            raise ClickHouseError(BAD_ARGUMENTS, "Unexpected end of request body (CANNOT_READ_ALL_DATA)")
        remaining -= len(data)
        yield data


def _chunked(rfile: Readable) -> Iterator[bytes]:
    while True:
        line = rfile.readline(1024)
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise ClickHouseError(BAD_ARGUMENTS, "Malformed chunked request body (BAD_REQUEST_PARAMETER)") from None
        if size == 0:
            while rfile.readline(8192).strip():  # trailer fields, then the blank line
                pass
            return
        while size > 0:
            data = rfile.read(min(READ_CHUNK, size))
            if not data:
                raise ClickHouseError(BAD_ARGUMENTS, "Unexpected end of chunked body (CANNOT_READ_ALL_DATA)")
            size -= len(data)
            yield data
        rfile.readline(16)  # CRLF closing the chunk


def decoded(chunks: Iterable[bytes], decoder: Decoder) -> Iterator[bytes]:
    for chunk in chunks:
        out = decoder.feed(chunk)
        if out:
            yield out
    tail = decoder.finish()
    if tail:
        yield tail


@dataclass
class Statement:
    """One statement for the engine; ``data_path`` is the spool file of an INSERT's data."""

    sql: str
    data_path: Path | None = None
    data_bytes: int = 0

    def discard(self) -> None:
        if self.data_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.data_path)


def read_statement(query: str | None, body: Iterable[bytes], spool_dir: Path) -> Statement:
    """Combine the query parameter and the decoded body into a Statement (see the module doc)."""
    head = bytearray((query + "\n").encode() if query else b"")
    chunks = iter(body)
    decision: sqltext.Split = "more"
    exhausted = False
    while decision == "more":
        chunk = next(chunks, None)
        if chunk is None:
            exhausted = True
            decision = sqltext.split_insert(bytes(head), complete=True)
            break
        head += chunk
        decision = sqltext.split_insert(bytes(head), complete=False)
        if decision == "more" and len(head) > HEAD_LIMIT:
            decision = "sql"
    if isinstance(decision, sqltext.InsertSplit):
        return _spool_insert(decision, bytes(head[decision.data_offset :]), chunks, spool_dir)
    if not exhausted:
        for chunk in chunks:
            head += chunk
            if len(head) > MAX_SQL_BYTES:
                raise ClickHouseError(SYNTAX_ERROR, "Query is too large (QUERY_IS_TOO_LARGE)")
    sql = head.decode("utf-8", errors="replace").strip()
    if not sql:
        raise ClickHouseError(SYNTAX_ERROR, "Empty query. (SYNTAX_ERROR)")
    return Statement(sql)


def _spool_insert(split: sqltext.InsertSplit, first: bytes, rest: Iterator[bytes], spool_dir: Path) -> Statement:
    fd, name = tempfile.mkstemp(prefix="insert-", suffix=f".{split.fmt.lower()}", dir=spool_dir)
    path = Path(name)
    size = 0
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(first)
            size += len(first)
            for chunk in rest:
                out.write(chunk)
                size += len(chunk)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    clause = f" {split.settings}" if split.settings else ""
    sql = f"{split.target} FROM INFILE {sqltext.quote_literal(str(path))}{clause} FORMAT {split.fmt}"
    return Statement(sql, data_path=path, data_bytes=size)


def form_fields(content_type: str, body: bytes) -> list[tuple[str, str]]:
    """Text fields of a multipart/form-data body (query, param_*), which clickhouse-connect uses for
    large parameter sets. File fields are ClickHouse "external data", which this endpoint lacks."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + body
    )
    if not message.is_multipart():
        raise ClickHouseError(BAD_ARGUMENTS, "Malformed multipart/form-data body (BAD_ARGUMENTS)")
    fields: list[tuple[str, str]] = []
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if part.get_filename() is not None:
            raise ClickHouseError(
                NOT_IMPLEMENTED, "External data tables are not supported by this endpoint (NOT_IMPLEMENTED)"
            )
        payload = part.get_payload(decode=True) or b""
        if isinstance(name, str):
            fields.append((name, bytes(payload).decode("utf-8", errors="replace")))
    return fields
