"""Which warehouse errors pass by themselves and which need an operator.

clickhouse-connect raises ``OperationalError`` for transport failures (connection refused or
reset, timeouts) and ``DatabaseError`` for everything the server answers, with the ClickHouse
error code in ``code`` when the server sent one. Three kinds follow from that:

* **transient** — the same request succeeds later: transport errors, an overloaded or restarting
  server (TOO_MANY_SIMULTANEOUS_QUERIES, MEMORY_LIMIT_EXCEEDED, TIMEOUT_EXCEEDED, a read-only
  replica or table, too many parts, lost Keeper session, …) and an HTTP 5xx or 429 without a
  ClickHouse code (a proxy or load balancer in front of the server). Retry with back-off.
* **schema** — the warehouse does not match the code (unknown table or column, wrong types, no
  permission, wrong credentials): no message can be written until an operator migrates or fixes
  the grants, so the worker stops loudly instead of dead-lettering everything.
* anything else is **permanent** for the request that caused it (e.g. a value the server cannot
  parse): the one message behind it becomes a dead letter.
"""

from __future__ import annotations

import re

from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError

# ClickHouse error codes (src/Common/ErrorCodes.cpp) that describe the server's state, not the request
TRANSIENT_CODES = frozenset(
    {
        159,  # TIMEOUT_EXCEEDED
        164,  # READONLY
        202,  # TOO_MANY_SIMULTANEOUS_QUERIES
        203,  # NO_FREE_CONNECTION
        209,  # SOCKET_TIMEOUT
        210,  # NETWORK_ERROR
        236,  # ABORTED
        241,  # MEMORY_LIMIT_EXCEEDED
        242,  # TABLE_IS_READ_ONLY
        252,  # TOO_MANY_PARTS
        285,  # TOO_FEW_LIVE_REPLICAS
        286,  # UNSATISFIED_QUORUM_FOR_PREVIOUS_WRITE
        319,  # UNKNOWN_STATUS_OF_INSERT
        373,  # SESSION_IS_LOCKED
        394,  # QUERY_WAS_CANCELLED
        425,  # SYSTEM_ERROR
        439,  # CANNOT_SCHEDULE_TASK
        999,  # KEEPER_EXCEPTION
        1000,  # POCO_EXCEPTION
    }
)
SCHEMA_CODES = frozenset(
    {
        8,  # THERE_IS_NO_COLUMN
        10,  # NOT_FOUND_COLUMN_IN_BLOCK
        16,  # NO_SUCH_COLUMN_IN_TABLE
        47,  # UNKNOWN_IDENTIFIER
        53,  # TYPE_MISMATCH
        60,  # UNKNOWN_TABLE
        81,  # UNKNOWN_DATABASE
        192,  # UNKNOWN_USER
        193,  # WRONG_PASSWORD
        194,  # REQUIRED_PASSWORD
        497,  # ACCESS_DENIED
        516,  # AUTHENTICATION_FAILED
    }
)
_HTTP_STATUS = re.compile(r"HTTP status (\d{3})")


def error_code(exc: BaseException) -> int | None:
    return getattr(exc, "code", None) if isinstance(exc, DatabaseError) else None


def is_transient(exc: BaseException) -> bool:
    """True when the same request may succeed later without anybody changing anything."""
    if isinstance(exc, OperationalError):
        return True
    if not isinstance(exc, DatabaseError):
        return False
    code = error_code(exc)
    if code is not None:
        return code in TRANSIENT_CODES
    status = _HTTP_STATUS.search(str(exc))
    return status is not None and (status.group(1).startswith("5") or status.group(1) == "429")


def is_schema_error(exc: BaseException) -> bool:
    """True when the warehouse does not match the code: an operator has to act."""
    return error_code(exc) in SCHEMA_CODES


def describe(exc: BaseException) -> str:
    """One line: the ClickHouse code (when known) and the first line of the message."""
    code = error_code(exc)
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    return f"code {code}: {first}" if code is not None else first
