"""Slurm hostlist and index-list expansion.

Slurm prints node sets in a compressed "hostlist" form (``nodes`` in ``sacct --json`` /
``squeue --json``, ``NodeList`` elsewhere) and GPU index sets in the same range grammar
(``gres_detail`` ``IDX:0-3,5``). The grammar handled here::

    hostlist := item ("," item)*               # commas inside brackets do not split items
    item     := (literal | "[" ranges "]")+    # each bracket group multiplies: cartesian product
    ranges   := range ("," range)*
    range    := N | N "-" M                    # N <= M, decimal

* Zero padding is kept: ``gpu[001-004]`` gives ``gpu001`` … ``gpu004``; the width is the number
  of digits written for the lower bound (``n[8-10]`` gives ``n8 n9 n10``).
* Several bracket groups in one name expand left to right, as Slurm's multi-dimensional
  hostlists do: ``a[1-2]b[3-4]`` gives ``a1b3 a1b4 a2b3 a2b4``; a suffix after a group is kept
  (``rack[1-2]-ib`` gives ``rack1-ib rack2-ib``).
* Order is kept as written; duplicates are kept (callers de-duplicate if they need to).
* Malformed input (unbalanced brackets, letters in a range, a reversed range, or an expansion
  above ``limit`` names) raises :class:`HostlistError`, a ``ValueError`` with a one-line message.
"""

from __future__ import annotations

import itertools

MAX_HOSTS = 65_536  # no real allocation names more nodes; larger expansions are garbage


class HostlistError(ValueError):
    """A hostlist or index list that does not follow Slurm's grammar."""


def expand(hostlist: str, *, limit: int = MAX_HOSTS) -> list[str]:
    """Every host name of a Slurm hostlist, in the order written."""
    if not isinstance(hostlist, str):
        raise HostlistError(f"hostlist must be a string, got {type(hostlist).__name__}")
    hosts: list[str] = []
    for item in _split_top_level(hostlist):
        hosts.extend(_expand_item(item, limit))
        if len(hosts) > limit:
            raise HostlistError(f"hostlist expands to more than {limit} names")
    return hosts


def expand_ranges(ranges: str, *, limit: int = MAX_HOSTS) -> list[int]:
    """The integers of a range list such as ``0-3,5,7-8`` (no brackets)."""
    return [int(text) for text in _range_strings(ranges, limit)]


def _split_top_level(text: str) -> list[str]:
    """Split at commas outside brackets; empty items are dropped."""
    items: list[str] = []
    depth, start = 0, 0
    for pos, char in enumerate(text):
        if char == "[":
            depth += 1
            if depth > 1:
                raise HostlistError(f"nested brackets in hostlist {text[:80]!r}")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"unbalanced ']' in hostlist {text[:80]!r}")
        elif char == "," and depth == 0:
            items.append(text[start:pos])
            start = pos + 1
    if depth != 0:
        raise HostlistError(f"unbalanced '[' in hostlist {text[:80]!r}")
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def _expand_item(item: str, limit: int) -> list[str]:
    """One hostlist item: literal text and bracket groups, cartesian product left to right."""
    if any(char.isspace() for char in item):
        raise HostlistError(f"whitespace inside host name {item[:80]!r}")
    parts: list[list[str]] = []
    rest = item
    while rest:
        open_at = rest.find("[")
        if open_at < 0:
            parts.append([rest])
            break
        close_at = rest.find("]", open_at)
        if open_at > 0:
            parts.append([rest[:open_at]])
        parts.append(_range_strings(rest[open_at + 1 : close_at], limit))
        rest = rest[close_at + 1 :]
    total = 1
    for choices in parts:
        total *= len(choices)
    if total > limit:
        raise HostlistError(f"hostlist {item[:80]!r} expands to more than {limit} names")
    return ["".join(combo) for combo in itertools.product(*parts)]


def _range_strings(ranges: str, limit: int) -> list[str]:
    """``001-003,7`` -> ``["001", "002", "003", "7"]`` with the lower bound's zero padding."""
    out: list[str] = []
    for part in ranges.split(","):
        part = part.strip()
        low, sep, high = part.partition("-")
        if not low.isdecimal() or (sep and not high.isdecimal()) or not low.isascii() or not high.isascii():
            raise HostlistError(f"bad range {part[:40]!r} in {ranges[:80]!r}")
        first, last = int(low), int(high) if sep else int(low)
        if last < first:
            raise HostlistError(f"reversed range {part[:40]!r}")
        if len(out) + (last - first + 1) > limit:
            raise HostlistError(f"range list {ranges[:80]!r} expands to more than {limit} values")
        width = len(low)
        out.extend(f"{number:0{width}d}" for number in range(first, last + 1))
    return out
