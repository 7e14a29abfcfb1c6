"""Errors of the embedded ClickHouse endpoint.

    infra.errors.InfraError
    └── ClickHouseError            a query failed; carries the ClickHouse error code, answered over
        │                          HTTP as "Code: N. DB::Exception: ..." + X-ClickHouse-Exception-Code
        └── AuthenticationFailed   code 516: wrong or missing credentials

Every failure an HTTP client can cause ends as a ClickHouseError, so the handler has one place
that turns exceptions into responses.
"""

from __future__ import annotations

import re

from infra.errors import InfraError

SYNTAX_ERROR = 62
UNKNOWN_TABLE = 60
UNKNOWN_DATABASE = 81
BAD_ARGUMENTS = 36
NOT_IMPLEMENTED = 48
CANNOT_DECOMPRESS = 271
UNKNOWN_COMPRESSION = 103
SESSION_NOT_FOUND = 372
SESSION_IS_LOCKED = 373
AUTHENTICATION_FAILED = 516
STD_EXCEPTION = 1001

_CODE_RE = re.compile(r"Code:\s*(\d+)\.\s*(?:DB::Exception:\s*)?(.*)", re.DOTALL)
_NAME_RE = re.compile(r"\(([A-Z][A-Z0-9_]+)\)\s*$")


class ClickHouseError(InfraError):
    """A failed request, answered the way ClickHouse answers it."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @classmethod
    def from_engine(cls, exc: BaseException) -> ClickHouseError:
        """Wrap an engine exception whose text reads "Code: N. DB::Exception: ..."."""
        return cls(*parse_engine_message(str(exc)))

    def body(self, version: str) -> str:
        """The response body ClickHouse would send, including its version trailer."""
        return f"Code: {self.code}. DB::Exception: {self.message} (version {version})\n"


class AuthenticationFailed(ClickHouseError):
    def __init__(self, user: str) -> None:
        super().__init__(
            AUTHENTICATION_FAILED,
            f"{user}: Authentication failed: password is incorrect, or there is no user with such name. "
            "(AUTHENTICATION_FAILED)",
        )


def parse_engine_message(text: str) -> tuple[int, str]:
    """(code, message) from an engine error text; unknown shapes become STD_EXCEPTION."""
    start = text.find("Code:")
    match = _CODE_RE.match(text[start:].strip()) if start >= 0 else None
    if match is None:
        message = text.strip() or "unknown engine error"
        return STD_EXCEPTION, f"{message} (STD_EXCEPTION)"
    return int(match.group(1)), match.group(2).strip()


def error_name(message: str) -> str | None:
    """The symbolic name ClickHouse puts at the end of its messages, e.g. UNKNOWN_TABLE."""
    match = _NAME_RE.search(message)
    return match.group(1) if match else None
