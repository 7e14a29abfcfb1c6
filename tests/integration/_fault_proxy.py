"""An HTTP proxy in front of the real ClickHouse endpoint that answers errors while told to.

Between ``fail_for`` and its deadline every request is answered the way an overloaded server or
a proxy in front of it answers — ClickHouse's error body and ``X-ClickHouse-Exception-Code``
(TOO_MANY_SIMULTANEOUS_QUERIES, MEMORY_LIMIT_EXCEEDED, TIMEOUT_EXCEEDED in turn), or a bare
``503`` with no code — and nothing reaches the endpoint; otherwise requests pass through whole.
"""

from __future__ import annotations

import http.client
import itertools
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

from infra.clickhouse.protocol import http_status

ERRORS = {
    202: "Too many simultaneous queries. Maximum: 100. (TOO_MANY_SIMULTANEOUS_QUERIES)",
    241: "Memory limit (total) exceeded: would use 9.31 GiB, maximum: 9.31 GiB. (MEMORY_LIMIT_EXCEEDED)",
    159: "Timeout exceeded: elapsed 30.001 seconds, maximum: 30. (TIMEOUT_EXCEEDED)",
}
HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length"}


class FaultProxy:
    def __init__(self, upstream: str) -> None:
        target = urlparse(upstream)
        self._upstream = (target.hostname or "127.0.0.1", target.port or 8123)
        self._until = 0.0
        self._codes = itertools.cycle([202, 241, 159, 503])
        self._lock = threading.Lock()
        self.failed = 0  # requests answered with an error
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                proxy._handle(self)

            def do_POST(self) -> None:  # noqa: N802
                proxy._handle(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def fail_for(self, seconds: float) -> None:
        self._until = time.monotonic() + seconds

    @property
    def failing(self) -> bool:
        return time.monotonic() < self._until

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handle(self, request: BaseHTTPRequestHandler) -> None:
        body = _read_body(request)
        if time.monotonic() < self._until:
            with self._lock:
                code = next(self._codes)
                self.failed += 1
            if code == 503:
                self._reply(request, 503, b"<html><body>503 Service Unavailable</body></html>", {})
            else:
                text = f"Code: {code}. DB::Exception: {ERRORS[code]} (version 25.8.1.1)\n".encode()
                self._reply(request, http_status(code), text, {"X-ClickHouse-Exception-Code": str(code)})
            return
        conn = http.client.HTTPConnection(*self._upstream, timeout=300)
        try:
            headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
            conn.request(request.command, request.path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
            passed = {k: v for k, v in response.getheaders() if k.lower() not in HOP_HEADERS}
            self._reply(request, response.status, data, passed)
        finally:
            conn.close()

    @staticmethod
    def _reply(request: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str]) -> None:
        request.send_response(status)
        for key, value in headers.items():
            request.send_header(key, value)
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        request.wfile.write(body)


def _read_body(request: BaseHTTPRequestHandler) -> bytes:
    """The request body, whole: by Content-Length or chunked (clickhouse-connect streams inserts)."""
    if request.headers.get("Transfer-Encoding", "").lower() != "chunked":
        length = int(request.headers.get("Content-Length") or 0)
        return request.rfile.read(length) if length else b""
    parts: list[bytes] = []
    while True:
        size = int(request.rfile.readline().split(b";")[0].strip(), 16)
        if size == 0:
            while request.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass
            return b"".join(parts)
        parts.append(request.rfile.read(size))
        request.rfile.readline()
