"""The ClickHouse HTTP interface as pure functions: URL parameters, credentials, status codes,
content types and the summary header.

URL parameters fall in three groups, as in ClickHouse's HTTP handler: ones the handler itself
consumes (query, database, session_id, ...), ``param_<name>`` values for server-side
``{name:Type}`` placeholders, and everything else, which is a query-level setting.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from infra.clickhouse.errors import AuthenticationFailed

#: consumed by the handler, never applied as settings
TRANSPORT_PARAMS = frozenset(
    {
        "query",
        "database",
        "session_id",
        "session_timeout",
        "session_check",
        "query_id",
        "default_format",
        "user",
        "password",
        "compress",
        "decompress",
        "quota_key",
        "buffer_size",
        "wait_end_of_query",
        "enable_http_compression",
        "client_protocol_version",
        "role",
        "stacktrace",
        "close_session",
        # HTTP progress and cancellation knobs: this handler answers only when the query has finished
        "send_progress_in_http_headers",
        "http_headers_progress_interval_ms",
        "cancel_http_readonly_queries_on_client_close",
        "http_wait_end_of_query",
    }
)

DEFAULT_SESSION_TIMEOUT_S = 60.0
MAX_SESSION_TIMEOUT_S = 3600.0


@dataclass
class RequestParams:
    """A request's URL parameters, sorted into what the handler, the placeholders and the engine need."""

    query: str | None = None
    database: str | None = None
    session_id: str | None = None
    session_timeout_s: float = DEFAULT_SESSION_TIMEOUT_S
    session_check: bool = False
    query_id: str = ""
    default_format: str | None = None
    enable_http_compression: str | None = None
    compress: bool = False
    decompress: bool = False
    params: dict[str, str] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)
    raw: dict[str, str] = field(default_factory=dict)


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _timeout(value: str | None) -> float:
    try:
        seconds = float(value) if value else DEFAULT_SESSION_TIMEOUT_S
    except ValueError:
        seconds = DEFAULT_SESSION_TIMEOUT_S
    return min(max(seconds, 1.0), MAX_SESSION_TIMEOUT_S)


def parse_params(pairs: Iterable[tuple[str, str]]) -> RequestParams:
    """Sort URL (or form) parameters; a later duplicate wins, as in ClickHouse."""
    raw: dict[str, str] = {}
    for key, value in pairs:
        raw[key] = value
    out = RequestParams(raw=raw)
    out.query = raw.get("query")
    out.database = raw.get("database") or None
    out.session_id = raw.get("session_id") or None
    out.session_timeout_s = _timeout(raw.get("session_timeout"))
    out.session_check = _truthy(raw.get("session_check"))
    out.query_id = raw.get("query_id", "")
    out.default_format = raw.get("default_format") or None
    out.enable_http_compression = raw.get("enable_http_compression")
    out.compress = _truthy(raw.get("compress"))
    out.decompress = _truthy(raw.get("decompress"))
    for key, value in raw.items():
        if key.startswith("param_"):
            out.params[key[len("param_") :]] = value
        elif key not in TRANSPORT_PARAMS:
            out.settings[key] = value
    return out


READER_USER = "gpuledger_reader"


@dataclass(frozen=True)
class Credentials:
    """The endpoint's accounts: the writer (no password: no authentication) and the read-only reader.

    The reader runs every statement with ``readonly = 1``: SELECT only, no settings changes, no table
    functions (``file()``, ``url()``), enforced by the engine itself. chdb has no access storage, so
    this stands in for a ClickHouse server's ``readonly = 2`` user with ``GRANT SELECT ON <db>.*``
    (``sql/access/reader.sql``). The reader signs in with its password, or without one while the
    endpoint asks for no authentication at all.
    """

    user: str = "default"
    password: str = ""
    reader_user: str = READER_USER
    reader_password: str = ""

    def __repr__(self) -> str:  # never show the secret
        return (
            f"Credentials(user={self.user!r}, password={'***' if self.password else ''!r}, "
            f"reader_user={self.reader_user!r}, reader_password={'***' if self.reader_password else ''!r})"
        )

    @property
    def required(self) -> bool:
        return bool(self.password)


def presented_credentials(headers: Mapping[str, str], params: Mapping[str, str]) -> tuple[str, str]:
    """(user, password) as ClickHouse reads them: Basic auth, X-ClickHouse-User/Key, user/password params.

    ``headers`` must have lower-case names (HTTP header names are case-insensitive).
    """
    auth = headers.get("authorization", "")
    if auth[:6].lower() == "basic ":
        try:
            user, _, password = base64.b64decode(auth[6:].strip()).decode("utf-8").partition(":")
            return user or "default", password
        except (binascii.Error, UnicodeDecodeError):
            return "", ""
    header_user = headers.get("x-clickhouse-user")
    if header_user is not None:
        return header_user or "default", headers.get("x-clickhouse-key", "")
    return params.get("user") or "default", params.get("password", "")


def authenticate(expected: Credentials, headers: Mapping[str, str], params: Mapping[str, str]) -> bool:
    """Raise AuthenticationFailed unless the request carries an account's credentials.

    Returns True for the read-only reader, False for the writer.
    """
    user, password = presented_credentials(headers, params)
    if expected.reader_user and hmac.compare_digest(user.encode(), expected.reader_user.encode()):
        if expected.reader_password:
            if hmac.compare_digest(password.encode(), expected.reader_password.encode()):
                return True
            raise AuthenticationFailed(user)
        if not expected.required:
            return True
        raise AuthenticationFailed(user)  # a guarded endpoint without a reader password has no reader
    if not expected.required:
        return False
    user_ok = hmac.compare_digest(user.encode(), expected.user.encode())
    password_ok = hmac.compare_digest(password.encode(), expected.password.encode())
    if not (user_ok and password_ok):
        raise AuthenticationFailed(user)
    return False


_BAD_REQUEST = frozenset(
    {
        6,
        25,
        26,
        27,
        32,
        33,
        36,
        38,
        41,
        43,
        53,
        62,
        69,
        72,
        117,
        130,
        131,
        134,
        167,
        168,
        190,
        318,
        319,
        350,
        352,
        403,
        430,
        467,
    }
)
_NOT_FOUND = frozenset({46, 47, 50, 56, 60, 63, 73, 81, 82, 86, 115, 287, 372})


def http_status(code: int) -> int:
    """HTTP status ClickHouse uses for an error code (exceptionCodeToHTTPStatus)."""
    if code == 194:  # REQUIRED_PASSWORD
        return 401
    if code in (192, 193, 516, 497):  # UNKNOWN_USER, WRONG_PASSWORD, AUTHENTICATION_FAILED, ACCESS_DENIED
        return 403
    if code in _BAD_REQUEST:
        return 400
    if code in _NOT_FOUND:
        return 404
    if code == 48:
        return 501
    if code == 159:  # TIMEOUT_EXCEEDED
        return 408
    return 500


def content_type(fmt: str) -> str:
    """Content-Type of an output format, following ClickHouse's output formats."""
    name = fmt.lower()
    if name.startswith(("tabseparated", "tsv")):
        return "text/tab-separated-values; charset=UTF-8"
    if name.startswith("csv"):
        header = "present" if "withnames" in name else "absent"
        return f"text/csv; charset=UTF-8; header={header}"
    if "eachrow" in name or name in ("jsonlines", "ndjson", "jsonstringseachrowwithprogress"):
        return "application/x-ndjson; charset=UTF-8"
    if name.startswith("json"):
        return "application/json; charset=UTF-8"
    if name == "xml":
        return "application/xml; charset=UTF-8"
    if name.startswith(("pretty", "vertical", "markdown", "values", "null", "template", "custom", "raw", "line")):
        return "text/plain; charset=UTF-8"
    return "application/octet-stream"


def summary_header(stats: Mapping[str, int]) -> str:
    """X-ClickHouse-Summary: every counter as a decimal string, as ClickHouse writes it."""
    keys = (
        "read_rows",
        "read_bytes",
        "written_rows",
        "written_bytes",
        "total_rows_to_read",
        "result_rows",
        "result_bytes",
        "elapsed_ns",
    )
    return json.dumps({key: str(int(stats.get(key, 0))) for key in keys}, separators=(",", ":"))
