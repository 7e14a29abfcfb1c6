"""Just enough SQL scanning for an HTTP front end: where an INSERT's inline data starts, which
output format a statement asked for, and what kind of statement it is.

The engine parses the SQL itself; this module never validates it. It only has to find top-level
keywords while skipping string literals, quoted identifiers, comments and parentheses, the same
way ClickHouse's own HTTP handler splits ``INSERT ... FORMAT <name>`` from the data that follows.
Text is scanned as latin-1 so character offsets are byte offsets of the request body.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

#: statements whose answer is a result set (ClickHouse then reports ``X-ClickHouse-Format``)
RESULT_KINDS = frozenset({"SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXISTS", "EXPLAIN", "CHECK", "("})

_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$")
_SPACE = " \t\r\n\f\v"


@dataclass(frozen=True)
class Token:
    """A word or punctuation mark: ``text`` as written, ``start``/``end`` offsets, paren ``depth``."""

    text: str
    start: int
    end: int
    depth: int

    @property
    def upper(self) -> str:
        return self.text.upper()


@dataclass(frozen=True)
class InsertSplit:
    """``INSERT ... FORMAT <fmt>`` followed by inline data starting at byte ``data_offset``.

    ``target`` is the statement up to a top-level SETTINGS clause (or up to FORMAT), ``settings``
    that clause (possibly empty), so that ``FROM INFILE`` can be placed between the two.
    """

    target: str
    settings: str
    fmt: str
    data_offset: int


Split = InsertSplit | Literal["sql", "more"]


def _skip_quoted(text: str, i: int, quote: str) -> int:
    """Offset just past the literal/identifier opened at ``i`` (or len(text) if unterminated)."""
    n = len(text)
    i += 1
    while i < n:
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == quote:
            if i + 1 < n and text[i + 1] == quote:  # doubled quote escapes itself
                i += 2
                continue
            return i + 1
        i += 1
    return n


def _skip_comment(text: str, i: int) -> int:
    """Offset past a comment at ``i``, or ``i`` itself when none starts there."""
    if text.startswith("--", i) or text.startswith("#!", i) or text.startswith("# ", i):
        end = text.find("\n", i)
        return len(text) if end < 0 else end + 1
    if text.startswith("/*", i):
        end = text.find("*/", i + 2)
        return len(text) if end < 0 else end + 2
    return i


def quote_identifier(name: str) -> str:
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"


def quote_literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def tokens(text: str) -> Iterator[Token]:
    """Words and punctuation outside literals and comments; quoted identifiers come out whole."""
    i, n, depth = 0, len(text), 0
    while i < n:
        ch = text[i]
        if ch in _SPACE:
            i += 1
            continue
        skipped = _skip_comment(text, i)
        if skipped != i:
            i = skipped
            continue
        if ch in "'\"`":
            end = _skip_quoted(text, i, ch)
            yield Token(text[i:end], i, end, depth)
            i = end
        elif ch in _WORD:
            end = i
            while end < n and text[end] in _WORD:
                end += 1
            yield Token(text[i:end], i, end, depth)
            i = end
        else:
            if ch == ")":
                depth = max(0, depth - 1)
            yield Token(ch, i, i + 1, depth)
            if ch == "(":
                depth += 1
            i += 1


def statement_kind(sql: str) -> str:
    """The statement's first keyword in upper case ("SELECT", "INSERT", "(", ...), "" when empty."""
    for tok in tokens(sql):
        return tok.upper
    return ""


def produces_result(sql: str) -> bool:
    return statement_kind(sql) in RESULT_KINDS


def output_format(sql: str) -> str | None:
    """The format named by the statement's last top-level ``FORMAT <name>`` clause, if any."""
    found: str | None = None
    prev: Token | None = None
    pending = False
    for tok in tokens(sql):
        if pending and tok.depth == 0 and (tok.text[0] in _WORD or tok.text[0] in '`"'):
            found = tok.text.strip('`"')
        pending = tok.depth == 0 and tok.upper == "FORMAT" and (prev is None or prev.text != ".")
        prev = tok
    return found


def _data_start(text: str, i: int) -> int:
    """ClickHouse's rule: data starts after the first newline, skipping blanks before it."""
    n = len(text)
    while i < n and text[i] in " \t\f":
        i += 1
    if i < n and text[i] == "\r":
        i += 1
    if i < n and text[i] == "\n":
        i += 1
    return i


def split_insert(head: bytes, complete: bool) -> Split:
    """Decide whether ``head`` (the start of a request's SQL stream) is ``INSERT ... FORMAT x <data>``.

    Returns an :class:`InsertSplit`, ``"sql"`` when the whole stream is one statement for the
    engine (SELECT, DDL, ``INSERT ... VALUES``/``SELECT``), or ``"more"`` when the FORMAT clause
    has not been seen yet and ``complete`` is false.
    """
    text = head.decode("latin-1")
    prev: Token | None = None
    settings_at: int | None = None
    for tok in tokens(text):
        if not complete and tok.end >= len(text):
            return "more"  # a word cut off by the chunk boundary may read differently when complete
        word = tok.upper
        if prev is None:
            if word != "INSERT":
                return "sql"
        elif tok.depth == 0 and not (prev.upper in ("INTO", "TABLE", "FUNCTION") or prev.text == "."):
            if word in ("VALUES", "SELECT", "WITH", "FROM"):
                return "sql"
            if word == "SETTINGS" and settings_at is None:
                settings_at = tok.start
            if word == "FORMAT":
                return _split_at_format(text, tok, settings_at, complete)
        prev = tok
    return "sql" if complete else "more"


def _split_at_format(text: str, fmt_tok: Token, settings_at: int | None, complete: bool) -> Split:
    i, n = fmt_tok.end, len(text)
    while i < n and text[i] in " \t\r\n\f":
        i += 1
    name_start = i
    while i < n and text[i] in _WORD:
        i += 1
    blanks_end = i
    while blanks_end < n and text[blanks_end] in " \t\f\r":
        blanks_end += 1
    if blanks_end == n and not complete:
        return "more"  # the format name or the newline after it may continue in the next chunk
    fmt = text[name_start:i]
    if not fmt:
        return "sql"
    head_end = fmt_tok.start
    cut = settings_at if settings_at is not None else head_end
    target = text[:cut].encode("latin-1").decode("utf-8", errors="replace").strip()
    settings = text[cut:head_end].encode("latin-1").decode("utf-8", errors="replace").strip()
    if i < n and text[i] == ";":
        return "sql"  # ClickHouse: "INSERT ... FORMAT x;" carries no data
    return InsertSplit(target, settings, fmt, _data_start(text, i))
