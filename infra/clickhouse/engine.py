"""The single owner of a chdb data directory, and the connection handles requests run on.

chdb hosts one engine per process and per data path; this process opens it once (the primary
handle, kept open until shutdown so the engine and its data stay loaded). Every request then runs
on a handle of its own, because settings (``SET``) and the current database (``USE``) live on the
handle:

- a request without ``session_id`` gets a fresh handle that is closed afterwards (opening one
  costs well under a millisecond), so nothing it changes can reach another request;
- a request with ``session_id`` runs on that session's handle, kept until ``session_timeout``
  idle seconds have passed, so ``SET``/``USE``/temporary tables persist as in a ClickHouse session.
  A session runs one request at a time (ClickHouse: SESSION_IS_LOCKED).

URL settings and the ``database`` parameter apply to one query only: on a session handle the
previous values are put back afterwards (``SET name = <old>`` or ``SET name = DEFAULT``), with the
old values cached per handle until the session itself runs a ``SET`` statement.
Different handles run concurrently; chdb serializes what it must internally.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import chdb

from infra.clickhouse import sqltext
from infra.clickhouse.errors import SESSION_IS_LOCKED, SESSION_NOT_FOUND, STD_EXCEPTION, ClickHouseError

log = logging.getLogger("gpuledger.clickhouse.engine")

MAX_SESSIONS = 512
# server settings of the engine, given when it is opened: its memory worker re-reads the allocator's
# statistics every 100 ms by default, the largest part of an idle endpoint's CPU; every 2 s is as
# good for one process that serves one deployment. Each MergeTree table's background job looks for
# merges again after a look that found nothing, first after 0.1 s (growing 1.1 times per empty
# look); a deployment has about 40 such tables per database, so after each insert and after a
# database is created those looks cost the endpoint more than its queries. An insert still starts a
# look at once (and a merge found starts the next), so merges are not delayed; only the looks that
# find nothing begin at 5 s. Each MergeTree table has a second such job, for the engine's streaming
# queries (``SELECT … FROM t STREAM``, which nothing here uses), with the same 0.1 s start: its looks
# begin at 60 s.
SERVER_SETTINGS = {
    "memory_worker_period_ms": 2000,
    "background_processing_pool_thread_sleep_seconds_if_nothing_to_do": 5,
    "background_streaming_processing_pool_thread_sleep_seconds_if_nothing_to_do": 60,
}
SESSION_LOCK_WAIT_S = 2.0
_SETTING_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class Handle:
    """One chdb connection plus what this process knows about its state."""

    conn: Any
    session_id: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    database: str = "default"
    # setting name -> SQL literal to restore after a query that overrode it (None: DEFAULT)
    baseline: dict[str, str | None] = field(default_factory=dict)
    # a session's URL settings still in force from its previous query, and the values that undo
    # them: restored only when a query asks for other settings (or none), not after every query
    applied: dict[str, str] = field(default_factory=dict)
    undo: dict[str, str | None] = field(default_factory=dict)
    timeout_s: float = 60.0
    last_used: float = field(default_factory=time.monotonic)

    def expired(self, now: float) -> bool:
        return now - self.last_used > self.timeout_s


@dataclass
class Outcome:
    """What one statement produced: the body bytes and the counters for X-ClickHouse-Summary."""

    body: bytes
    stats: dict[str, int]


def _stats(result: Any) -> dict[str, int]:
    def get(name: str) -> int:
        try:
            return int(getattr(result, name)())
        except (AttributeError, TypeError, ValueError):
            return 0

    read_rows = get("storage_rows_read")
    return {
        "read_rows": read_rows,
        "read_bytes": get("storage_bytes_read"),
        "total_rows_to_read": read_rows,
        "written_rows": get("rows_written"),
        "written_bytes": get("bytes_written"),
        "result_rows": get("rows_read"),
        "result_bytes": get("bytes_read"),
        "elapsed_ns": int(float(getattr(result, "elapsed", lambda: 0.0)()) * 1e9),
    }


class Engine:
    """The chdb engine of one data directory and the handles requests run on."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._registry = threading.Lock()
        self._sessions: dict[str, Handle] = {}
        self._inflight = 0
        self._idle = threading.Condition(self._registry)
        self._closed = False
        data_dir.mkdir(parents=True, exist_ok=True)
        self._primary = chdb.connect(f"file:{data_dir}?{urlencode(SERVER_SETTINGS)}")
        version, timezone = self._primary.query("SELECT version(), timezone()", "TabSeparated").bytes().split(b"\t")
        self.version = version.decode()
        self.timezone = timezone.decode().strip()
        compression = self._primary.query(
            "SELECT value FROM system.settings WHERE name = 'enable_http_compression'", "TabSeparated"
        )
        self.http_compression_default = compression.bytes().strip() not in (b"", b"0")

    # --- handles ------------------------------------------------------------------------------

    def _connect(self) -> Any:
        with self._registry:
            if self._closed:
                raise ClickHouseError(STD_EXCEPTION, "The server is shutting down (ABORTED)")
            self._inflight += 1
            try:
                return chdb.connect(str(self.data_dir))
            except Exception:
                self._inflight -= 1
                raise

    def _release(self, handle: Handle, close: bool) -> None:
        with self._registry:
            if close:
                with contextlib.suppress(Exception):
                    handle.conn.close()
            self._inflight -= 1
            self._idle.notify_all()

    def _session(self, session_id: str, timeout_s: float, check: bool) -> Handle:
        now = time.monotonic()
        with self._registry:
            if self._closed:
                raise ClickHouseError(STD_EXCEPTION, "The server is shutting down (ABORTED)")
            for sid, old in list(self._sessions.items()):
                if old.expired(now) and old.lock.acquire(blocking=False):
                    del self._sessions[sid]
                    with contextlib.suppress(Exception):
                        old.conn.close()
            handle = self._sessions.get(session_id)
            if handle is None:
                if check:
                    raise ClickHouseError(SESSION_NOT_FOUND, f"Session {session_id} not found (SESSION_NOT_FOUND)")
                if len(self._sessions) >= MAX_SESSIONS:
                    raise ClickHouseError(STD_EXCEPTION, "Too many open sessions (TOO_MANY_SIMULTANEOUS_QUERIES)")
                handle = Handle(chdb.connect(str(self.data_dir)), session_id=session_id)
                self._sessions[session_id] = handle
            handle.timeout_s = timeout_s
            handle.last_used = now  # not expired while this request waits for it
            return handle

    @contextlib.contextmanager
    def handle(
        self,
        session_id: str | None = None,
        timeout_s: float = 60.0,
        check: bool = False,
        close_session: bool = False,
    ) -> Iterator[Handle]:
        """The handle one request runs on, held exclusively for the duration of the request."""
        if session_id is None:
            handle = Handle(self._connect())
            try:
                yield handle
            finally:
                self._release(handle, close=True)
            return
        handle = self._session(session_id, timeout_s, check)
        if not handle.lock.acquire(timeout=SESSION_LOCK_WAIT_S):
            raise ClickHouseError(
                SESSION_IS_LOCKED,
                f"Session {session_id} is locked by a concurrent client. (SESSION_IS_LOCKED)",
            )
        with self._registry:
            self._inflight += 1
        try:
            yield handle
        finally:
            handle.last_used = time.monotonic()
            if close_session:
                with self._registry:
                    self._sessions.pop(session_id, None)
            handle.lock.release()
            self._release(handle, close=close_session)

    # --- execution ----------------------------------------------------------------------------

    def run(
        self,
        handle: Handle,
        sql: str,
        fmt: str,
        params: Mapping[str, str] | None = None,
        settings: Mapping[str, str] | None = None,
        database: str | None = None,
    ) -> Outcome:
        """Run one statement with per-query settings and database, leaving the handle as it was."""
        switch_db = database is not None and database != handle.database
        if switch_db:
            self._query(handle, f"USE {sqltext.quote_identifier(database or '')}")
        try:
            with self._settings(handle, settings or {}, restore_after=sqltext.statement_kind(sql) == "SET"):
                result = self._query(handle, sql, fmt, params)
        finally:
            if handle.session_id is not None:
                self._after_session_query(handle, sqltext.statement_kind(sql), switch_db)
        return Outcome(result.bytes(), _stats(result))

    def _after_session_query(self, handle: Handle, kind: str, switched_db: bool) -> None:
        """Keep what the statement changed on purpose (USE, SET); undo the per-query database."""
        if kind == "SET":
            handle.baseline.clear()
        if kind != "USE" and not switched_db:
            return
        if kind != "USE":
            try:
                self._query(handle, f"USE {sqltext.quote_identifier(handle.database)}")
                return
            except ClickHouseError:  # the session's database is gone (dropped by this very query?)
                log.debug("session database vanished; falling back to the current one")
        current = self._query(handle, "SELECT currentDatabase()", "TabSeparated").bytes()
        handle.database = current.decode().strip()

    def _query(
        self, handle: Handle, sql: str, fmt: str = "TabSeparated", params: Mapping[str, str] | None = None
    ) -> Any:
        try:
            return handle.conn.query(sql, fmt, params=dict(params or {}))
        except Exception as exc:
            raise ClickHouseError.from_engine(exc) from exc

    @contextlib.contextmanager
    def _settings(self, handle: Handle, settings: Mapping[str, str], restore_after: bool = False) -> Iterator[None]:
        """Run the block under ``settings``. A fresh handle is closed after its query; a session's
        settings are put back before the next query that asks for other ones (most clients send the
        same settings with every query: then nothing is set or restored), or right after the block
        with ``restore_after`` (a ``SET`` statement: what it sets becomes the session's baseline)."""
        for name in settings:
            if not _SETTING_NAME.fullmatch(name):
                raise ClickHouseError(115, f"Unknown setting '{name}' (UNKNOWN_SETTING)")
        if handle.session_id is None:
            if settings:
                self._set(handle, settings)
            yield
            return
        wanted = dict(settings)
        if handle.applied != wanted:
            self._restore(handle)
            if wanted:
                handle.applied, handle.undo = wanted, self._baseline(handle, wanted)
                try:
                    self._set(handle, wanted)
                except ClickHouseError:
                    self._restore(handle)
                    raise
        try:
            yield
        finally:
            if restore_after:
                self._restore(handle)

    def _set(self, handle: Handle, settings: Mapping[str, str]) -> None:
        self._query(handle, "SET " + ", ".join(f"{k} = {sqltext.quote_literal(v)}" for k, v in settings.items()))

    def _restore(self, handle: Handle) -> None:
        """Put back what the session's previous URL settings overrode."""
        undo = handle.undo
        handle.applied, handle.undo = {}, {}
        if not undo:
            return
        try:
            self._query(handle, "SET " + ", ".join(f"{k} = {'DEFAULT' if v is None else v}" for k, v in undo.items()))
        except ClickHouseError:
            log.warning("could not restore settings on session handle; closing it")
            handle.timeout_s = 0.0

    def _baseline(self, handle: Handle, settings: Mapping[str, str]) -> dict[str, str | None]:
        """The values to put back after the query (SQL literals, or None for DEFAULT)."""
        missing = [name for name in settings if name not in handle.baseline]
        if missing:
            names = ", ".join(sqltext.quote_literal(n) for n in missing)
            rows = self._query(
                handle,
                f"SELECT name, value, changed FROM system.settings WHERE name IN ({names})",
                "JSONEachRow",
            ).bytes()
            for line in rows.splitlines():
                row = json.loads(line)
                handle.baseline[row["name"]] = sqltext.quote_literal(row["value"]) if row["changed"] else None
            for name in missing:
                handle.baseline.setdefault(name, None)
        return {name: handle.baseline[name] for name in settings}

    # --- shutdown -----------------------------------------------------------------------------

    def close(self, wait_s: float = 30.0) -> None:
        """Wait for running requests (up to wait_s), close every handle, then the engine itself."""
        deadline = time.monotonic() + wait_s
        with self._registry:
            self._closed = True
            while self._inflight > 0 and time.monotonic() < deadline:
                self._idle.wait(timeout=max(0.0, deadline - time.monotonic()))
            for handle in self._sessions.values():
                with contextlib.suppress(Exception):
                    handle.conn.close()
            self._sessions.clear()
            with contextlib.suppress(Exception):
                self._primary.close()
