"""Bearer tokens of the HTTP API and what each may see.

A token's **scope** is ``all`` or ``business_unit:<name>``. Tokens come from the environment,
``GPULEDGER_API_TOKENS='<token>=all,<token>=business_unit:Research'``, or from a file
(``--tokens-file``) that holds only their SHA-256 hashes, one per line:

    sha256:<64 hex digits> all
    sha256:<64 hex digits> business_unit:Research expires=2027-03-31T00:00:00Z

(``gpuledger serve --hash-token`` prints the line for a token.) ``expires=`` is optional: an ISO 8601
time (UTC unless it says otherwise; a date alone is midnight UTC at its start) from which the token
is refused with a 401 saying so, and the access log gives that reason. A request's token is hashed and
compared in constant time; the plain token is never stored or logged (the access log names a
token by ``sha256:`` and the first 12 hex digits of its hash).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from pipelines.errors import PipelineError
from pipelines.times import parse_iso, utc_iso

BU_PREFIX = "business_unit:"
TOKEN_ID_DIGITS = 12  # of the hash, in the access log: enough to tell tokens apart, no use to a guesser


class BadTokens(PipelineError):
    """The configured tokens cannot be read."""


@dataclass(frozen=True)
class Scope:
    business_unit: str | None = None  # None: every business unit

    @classmethod
    def parse(cls, text: str) -> Scope:
        text = text.strip()
        if text == "all":
            return cls()
        if text.startswith(BU_PREFIX) and text[len(BU_PREFIX) :].strip():
            return cls(text[len(BU_PREFIX) :].strip())
        raise BadTokens(f"a token's scope is 'all' or 'business_unit:<name>', not {text!r}")

    def __str__(self) -> str:
        return "all" if self.business_unit is None else f"{BU_PREFIX}{self.business_unit}"


class Known(NamedTuple):
    """A known token: its id (``sha256:`` and the first 12 hex digits of its hash: never the token),
    its scope and when it expires (None: never)."""

    id: str
    scope: Scope
    expires: datetime | None = None

    def expired(self, now: datetime) -> str | None:
        """None while the token holds, else the one-line reason it is refused."""
        if self.expires is None or now < self.expires:
            return None
        return f"token {self.id} expired at {utc_iso(self.expires)}"


def parse_expiry(text: str) -> datetime:
    """``expires=`` of a tokens-file line: an ISO 8601 time, UTC unless it says otherwise."""
    try:
        return parse_iso(text)
    except ValueError:
        raise BadTokens(f"expires= takes an ISO 8601 time such as 2027-03-31T00:00:00Z, not {text!r}") from None


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def hashed_line(token: str, scope: str) -> str:
    return f"sha256:{digest(token)} {Scope.parse(scope)}"


Entry = tuple[Scope, datetime | None]  # a hash's scope and expiry


class Tokens:
    def __init__(self, hashes: dict[str, Entry]) -> None:
        self._hashes = hashes

    def __len__(self) -> int:
        return len(self._hashes)

    @classmethod
    def from_env(cls, text: str) -> Tokens:
        hashes: dict[str, Entry] = {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            token, sep, scope = item.partition("=")
            if not sep or not token.strip():
                raise BadTokens("GPULEDGER_API_TOKENS is '<token>=<scope>' separated by commas")
            hashes[digest(token.strip())] = (Scope.parse(scope), None)
        return cls(hashes)

    @classmethod
    def from_file(cls, path: Path) -> Tokens:
        hashes: dict[str, Entry] = {}
        try:
            lines = path.read_text().splitlines()
        except OSError as exc:
            raise BadTokens(f"cannot read tokens file {path}: {exc.strerror}") from None
        for n, line in enumerate(lines, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            hashed, _, rest = line.partition(" ")
            hexed = hashed.removeprefix("sha256:")
            if not hashed.startswith("sha256:") or len(hexed) != 64 or any(c not in "0123456789abcdef" for c in hexed):
                raise BadTokens(f"{path}:{n}: expected 'sha256:<64 hex digits> <scope> [expires=<ISO time>]'")
            scope, *options = rest.split()
            try:
                if options and (len(options) > 1 or not options[0].startswith("expires=")):
                    raise BadTokens(f"after the scope only expires=<ISO time> may follow, not {' '.join(options)!r}")
                hashes[hexed] = (Scope.parse(scope), parse_expiry(options[0][8:]) if options else None)
            except BadTokens as exc:
                raise BadTokens(f"{path}:{n}: {exc}") from None
        return cls(hashes)

    def scope_of(self, token: str) -> Scope | None:
        found = self.identify(token)
        return found.scope if found else None

    def identify(self, token: str) -> Known | None:
        """The token's id (``sha256:`` and the first 12 hex digits of its hash, as the tokens file
        shows it: never the token), scope and expiry; None for an unknown token."""
        wanted = digest(token)
        found = None
        for known, (scope, expires) in self._hashes.items():  # every hash compared: no timing difference
            if hmac.compare_digest(known, wanted):
                found = Known(f"sha256:{known[:TOKEN_ID_DIGITS]}", scope, expires)
        return found
