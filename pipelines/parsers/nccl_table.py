"""The nccl-tests result table (:mod:`pipelines.parsers.nccl`): its header, its cells, and the collective
a table without any name can only come from.

The table is read by its own header line (``size count type [redop] [root]`` then, per side,
``time|cputime algbw busbw #wrong|error``), so column sets differ freely between versions.
"""

from __future__ import annotations

import math
import re
from typing import Any

from pipelines.parsers import prom

ERROR_LIMIT = {
    "float": 1e-5,
    "float32": 1e-5,
    "double": 1e-12,
    "float64": 1e-12,
    "half": 5e-2,
    "float16": 5e-2,
    "bfloat16": 5e-2,
}
_NUMBER = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")
_PREFIX = {"size": "size_bytes", "count": "count", "type": "dtype", "redop": "redop", "root": "root"}
# bytes per element of nccl-tests' type names (ncclDataType_t spellings)
TYPE_BYTES = {
    "int8": 1,
    "uint8": 1,
    "char": 1,
    "f8e4m3": 1,
    "f8e5m2": 1,
    "half": 2,
    "float16": 2,
    "bfloat16": 2,
    "int32": 4,
    "uint32": 4,
    "int": 4,
    "float": 4,
    "float32": 4,
    "int64": 8,
    "uint64": 8,
    "double": 8,
    "float64": 8,
}
_GROUP = {
    "time": "time_us",
    "cputime": "time_us",
    "algbw": "algbw_gbps",
    "busbw": "busbw_gbps",
    "#wrong": "wrong",
    "error": "error",
}


def header(s: str) -> list[str] | None:
    """The table's column names, or None when ``s`` is not the table header line."""
    if not s.startswith("#"):
        return None
    tokens = s.lstrip("#").split()
    if len(tokens) < 7 or tokens[0] != "size" or "busbw" not in tokens:
        return None
    return tokens


def columns(tokens: list[str]) -> list[str] | None:
    """The row field names of a header's tokens (``out_of_place_time_us``, …), or None when unknown."""
    split = next((i for i, t in enumerate(tokens) if t in ("time", "cputime")), len(tokens))
    prefix, rest = tokens[:split], tokens[split:]
    groups = [rest[i : i + 4] for i in range(0, len(rest), 4)]
    if not groups or any(t not in _PREFIX for t in prefix) or not all(map(group_ok, groups)):
        return None
    names = [_PREFIX[t] for t in prefix]
    for side, group in zip(("out_of_place", "in_place", "extra"), groups, strict=False):
        names += [f"{side}_{_GROUP[t]}" for t in group]
    return names


def group_ok(group: list[str]) -> bool:
    """One side of the table: time (or cputime), algbw, busbw, then #wrong or error."""
    return (
        len(group) == 4
        and group[0] in ("time", "cputime")
        and group[1:3] == ["algbw", "busbw"]
        and group[3] in ("#wrong", "error")
    )


def cell(name: str, token: str) -> Any:
    if name in ("size_bytes", "count"):
        value = prom.small_int(token)
        if value is None or value < 0:
            raise ValueError(f"{name} {token[:20]!r} is not an integer")
        return value
    if name == "dtype":
        return token
    if name == "redop":
        return None if token == "none" else token
    if name == "root":
        root = prom.small_int(token)
        if root is None:
            raise ValueError(f"root {token[:20]!r} is not an integer")
        return None if root < 0 else root
    if token == "N/A":
        return None
    number = to_float(token.rstrip("*"))
    if number is None and not re.fullmatch(r"[+-]?(?:inf|nan)", token.lower()):
        raise ValueError(f"{name} {token[:20]!r} is not a number")
    if name.endswith("_wrong") and number is not None:
        if not 0 <= number < 2**63 or number != int(number):
            raise ValueError(f"#wrong {token[:20]!r} is not a count")
        return int(number)
    return number


def to_float(token: str) -> float | None:
    if not _NUMBER.match(token):
        return None
    value = float(token)
    return value if math.isfinite(value) else None


def infer(results: list[dict[str, Any]], ranks: int) -> str:
    """The collective a table without any name can only come from (nccl-tests' ``*GetCollByteCount``):
    the printed size is ``count × type size`` for all_reduce, reduce, broadcast (and sendrecv), and
    ``count × type size × ranks`` for reduce_scatter (and all_gather, alltoall, gather, scatter).
    A redop (not ``none``) with a root is reduce; with no root all_reduce or reduce_scatter by size;
    no redop with a root and the plain size is broadcast. Anything else stays ``unknown``."""
    rows = [r for r in results if r.get("count") and r.get("dtype") in TYPE_BYTES]
    if not rows:
        return "unknown"
    reducing = {bool(r.get("redop")) for r in rows}
    rooted = {r.get("root") is not None for r in rows}
    factors = {r["size_bytes"] / (r["count"] * TYPE_BYTES[r["dtype"]]) for r in rows}
    if len(reducing) != 1 or len(rooted) != 1 or len(factors) != 1:
        return "unknown"
    (reduces,), (has_root,), (factor,) = reducing, rooted, factors
    if reduces and has_root:
        return "reduce"
    if reduces:
        return "all_reduce" if factor == 1 else "reduce_scatter" if ranks > 1 and factor == ranks else "unknown"
    return "broadcast" if has_root and factor == 1 else "unknown"
