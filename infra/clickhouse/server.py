"""The HTTP side of the endpoint: a threaded HTTP/1.1 server speaking ClickHouse's HTTP interface.

One thread per connection (keep-alive), one engine handle per request (see engine.py), whole
results answered with Content-Length. Request lines are logged at debug level without their
query string, which can carry a password.
"""

from __future__ import annotations

import contextlib
import logging
import re
import selectors
import shutil
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from infra.clickhouse import codecs, payload, protocol, sqltext
from infra.clickhouse.engine import Engine, Outcome
from infra.clickhouse.errors import NOT_IMPLEMENTED, STD_EXCEPTION, ClickHouseError
from infra.clickhouse.protocol import Credentials, RequestParams

log = logging.getLogger("gpuledger.clickhouse.server")

_OK_PATHS = frozenset({"/ping", "/replicas_status"})
_SECRET_PARAM = re.compile(r"(password|user)=[^&\s'\"]*", re.IGNORECASE)
MAX_FORM_BYTES = 64 << 20
MAX_DRAIN_BYTES = 256 << 20  # an unread body up to this size is skipped so the connection can be reused


class EndpointServer(ThreadingHTTPServer):
    """Owns the engine, the credentials and the spool directory of INSERT data.

    Between connections its thread sleeps until one arrives or ``shutdown`` wakes it (through a
    socket pair), where ``socketserver`` would look for a stop request every poll interval: each
    wake-up costs an idle process CPU (tests/integration/test_clickhouse_endpoint.py)."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(self, engine: Engine, host: str, port: int, credentials: Credentials) -> None:
        self.engine = engine
        self.credentials = credentials
        self.display_name = socket.gethostname()
        self._active = 0
        self._quiet = threading.Condition()
        super().__init__((host, port), QueryHandler)  # binds: raises OSError when the port is taken
        self.spool_dir = Path(tempfile.mkdtemp(prefix="gpuledger-chdb-spool-"))
        self._wake, self._waker = socket.socketpair()
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()  # not serving yet

    def serve_forever(self, poll_interval: float | None = None) -> None:
        """Accept connections (each answered on its own thread) until ``shutdown``; never polls."""
        self._stopped.clear()
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(self, selectors.EVENT_READ)
                selector.register(self._wake, selectors.EVENT_READ)
                while not self._stopping.is_set():
                    for key, _ in selector.select():
                        if key.fileobj is self and not self._stopping.is_set():
                            self.handle_request()  # ready: accepts without waiting
        finally:
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop accepting connections and wait until ``serve_forever`` has returned."""
        self._stopping.set()
        self._waker.send(b"\0")
        self._stopped.wait()

    @contextlib.contextmanager
    def request_running(self) -> Iterator[None]:
        with self._quiet:
            self._active += 1
        try:
            yield
        finally:
            with self._quiet:
                self._active -= 1
                self._quiet.notify_all()

    def wait_quiet(self, timeout_s: float) -> bool:
        """Wait until no request is being answered; False if some still are after timeout_s."""
        with self._quiet:
            return self._quiet.wait_for(lambda: self._active == 0, timeout=timeout_s)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host.decode() if isinstance(host, bytes) else host}:{port}"

    def handle_error(self, request: object, client_address: object) -> None:
        log.debug("connection from %s failed", client_address, exc_info=True)

    def server_close(self) -> None:
        super().server_close()
        self._wake.close()
        self._waker.close()
        shutil.rmtree(self.spool_dir, ignore_errors=True)


class QueryHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "gpuledger-chdb"
    disable_nagle_algorithm = True
    timeout = 3600  # seconds an idle keep-alive connection is kept (clients recycle theirs after 600)
    server: EndpointServer
    _raw: Iterator[bytes]  # the request body as sent, consumed at most once
    _body_done: bool  # the body has been read to its end

    def do_GET(self) -> None:
        with self.server.request_running():
            self._serve()

    def do_POST(self) -> None:
        with self.server.request_running():
            self._serve()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - base class signature
        # http.server's own messages can quote a malformed request line, query string included
        log.debug("%s %s", self.address_string(), _SECRET_PARAM.sub(r"\1=***", format % args))

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        log.debug("%s %s %s -> %s", self.address_string(), self.command, urlsplit(self.path).path, code)

    # --- request flow -------------------------------------------------------------------------

    def _serve(self) -> None:
        self._start_body()
        url = urlsplit(self.path)
        if url.path in _OK_PATHS:
            self.close_connection = self.close_connection or not self._drain()
            self._reply(200, b"Ok.\n", {"Content-Type": "text/plain; charset=UTF-8"})
            return
        params = protocol.parse_params(parse_qsl(url.query, keep_blank_values=True))
        query_id = params.query_id or str(uuid.uuid4())
        try:
            headers = {name.lower(): value for name, value in self.headers.items()}
            reader = protocol.authenticate(self.server.credentials, headers, params.raw)
            params = self._with_form_fields(params)
            if self.command == "GET" and params.query is None and url.path == "/":
                self._reply(200, b"Ok.\n", {"Content-Type": "text/plain; charset=UTF-8"})
                return
            self._answer(params, query_id, reader)
        except ClickHouseError as exc:
            self._error(exc, query_id)
        except Exception as exc:  # the one place where anything unexpected becomes an HTTP answer
            log.exception("request failed")
            self._error(ClickHouseError(STD_EXCEPTION, f"{type(exc).__name__}: {exc} (STD_EXCEPTION)"), query_id)

    def _with_form_fields(self, params: RequestParams) -> RequestParams:
        ctype = self.headers.get("Content-Type", "")
        if not ctype.lower().startswith("multipart/form-data"):
            return params
        body = bytearray()
        for chunk in self._body():
            body += chunk
            if len(body) > MAX_FORM_BYTES:
                raise ClickHouseError(STD_EXCEPTION, "Form body is too large (QUERY_IS_TOO_LARGE)")
        self._raw = iter([])  # the form was the body: nothing follows the query
        fields = payload.form_fields(ctype, bytes(body))
        return protocol.parse_params([*params.raw.items(), *fields])

    def _answer(self, params: RequestParams, query_id: str, reader: bool = False) -> None:
        if params.compress or params.decompress:
            raise ClickHouseError(
                NOT_IMPLEMENTED,
                "ClickHouse-native HTTP compression (compress/decompress=1) "
                "is not supported; use Content-Encoding (NOT_IMPLEMENTED)",
            )
        database = params.database or self.headers.get("X-ClickHouse-Database") or None
        default_format = params.default_format or self.headers.get("X-ClickHouse-Format") or "TabSeparated"
        engine = self.server.engine
        started = time.monotonic()
        statement = payload.read_statement(params.query, self._body(), self.server.spool_dir)
        settings = params.settings
        if reader:  # a fresh handle each time, the query last under readonly = 1 (see Credentials)
            settings = {k: v for k, v in settings.items() if k != "readonly"} | {"readonly": "1"}
        try:
            close = params.raw.get("close_session", "") in ("1", "true")
            with engine.handle(
                None if reader else params.session_id,
                params.session_timeout_s,
                params.session_check and not reader,
                close,
            ) as handle:
                outcome = engine.run(handle, statement.sql, default_format, params.params, settings, database)
        finally:
            statement.discard()
        result_format: str | None = None
        if statement.data_path is None and (outcome.body or sqltext.produces_result(statement.sql)):
            result_format = sqltext.output_format(statement.sql) or default_format
        log.debug(
            "query %s: %d bytes in, %d bytes out, %.1f ms",
            query_id,
            statement.data_bytes,
            len(outcome.body),
            (time.monotonic() - started) * 1000,
        )
        self._send_outcome(outcome, result_format, params, query_id)

    def _send_outcome(self, outcome: Outcome, result_format: str | None, params: RequestParams, query_id: str) -> None:
        headers = self._clickhouse_headers(query_id, params)
        headers["X-ClickHouse-Summary"] = protocol.summary_header(outcome.stats)
        headers["Content-Type"] = protocol.content_type(result_format or "TabSeparated")
        if result_format:
            headers["X-ClickHouse-Format"] = result_format
        body: bytes = outcome.body
        coding = self._response_coding(params) if body else None
        if coding:
            body = codecs.encode(body, coding)
            headers["Content-Encoding"] = coding
        self._reply(200, body, headers)

    def _response_coding(self, params: RequestParams) -> str | None:
        flag = params.enable_http_compression
        enabled = self.server.engine.http_compression_default if flag is None else flag.strip() in ("1", "true")
        return codecs.choose_encoding(self.headers.get("Accept-Encoding")) if enabled else None

    # --- plumbing -----------------------------------------------------------------------------

    def _start_body(self) -> None:
        self._body_done = self.command == "GET"
        chunked = "chunked" in self.headers.get("Transfer-Encoding", "").lower()
        content_length = self.headers.get("Content-Length")
        self._raw = iter(()) if self._body_done else payload.raw_chunks(self.rfile, content_length, chunked)

    def _raw_body(self) -> Iterator[bytes]:
        yield from self._raw
        self._body_done = True

    def _body(self) -> Iterator[bytes]:
        """The decoded request body, read lazily (the INSERT spooler streams it to disk)."""
        return payload.decoded(self._raw_body(), codecs.decoder(self.headers.get("Content-Encoding")))

    def _drain(self) -> bool:
        """Skip what is left of the body; False when it is too large or broken (then close)."""
        skipped = 0
        try:
            for chunk in self._raw:
                skipped += len(chunk)
                if skipped > MAX_DRAIN_BYTES:
                    return False
        except (ClickHouseError, OSError, ValueError):
            return False
        self._body_done = True
        return True

    def _clickhouse_headers(self, query_id: str, params: RequestParams | None) -> dict[str, str]:
        timezone = (params.settings.get("session_timezone") if params else None) or self.server.engine.timezone
        return {
            "X-ClickHouse-Query-Id": query_id,
            "X-ClickHouse-Timezone": timezone,
            "X-ClickHouse-Server-Display-Name": self.server.display_name,
        }

    def _error(self, exc: ClickHouseError, query_id: str) -> None:
        if not self._body_done and not self._drain():
            self.close_connection = True  # an unread body would be taken for the next request
        headers = self._clickhouse_headers(query_id, None)
        headers["X-ClickHouse-Exception-Code"] = str(exc.code)
        headers["Content-Type"] = "text/plain; charset=UTF-8"
        log.debug("query %s failed with code %d", query_id, exc.code)
        self._reply(protocol.http_status(exc.code), exc.body(self.server.engine.version).encode(), headers)

    def _reply(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        else:
            self.send_header("Keep-Alive", "timeout=3600")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


def start(engine: Engine, host: str, port: int, credentials: Credentials) -> tuple[EndpointServer, threading.Thread]:
    """Bind and serve in a background thread; returns the server (its .url has the real port)."""
    server = EndpointServer(engine, host, port, credentials)
    thread = threading.Thread(target=server.serve_forever, name="clickhouse-endpoint", daemon=True)
    thread.start()
    return server, thread
