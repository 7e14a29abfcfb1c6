"""Readers for the value shapes of Slurm's JSON output, data_parser v0.0.39 to v0.0.42.

Each function takes one raw JSON value and returns a plain Python value, or raises
``ValueError`` with a one-line message for a shape it does not know. Shapes accepted:

* numbers: plain ``int`` (v0.0.39, most of ``sacct``) or ``{"set": bool, "infinite": bool,
  "number": n}`` (v0.0.40+, ``squeue``); unset or infinite -> ``None``.
* times: epoch seconds in either number shape; ``0`` means "not yet" -> ``None``.
* job state: ``"COMPLETED"`` (v0.0.39) or a list of base state and flags
  ``["RUNNING", "REQUEUED"]`` (v0.0.40+).
* exit code: v0.0.39 ``{"status": "SIGNALED", "return_code": 0, "signal": {"signal_id": 9,
  "name": "KILL"}}``; v0.0.40+ ``{"status": ["SIGNALED"], "return_code": {"set": true,
  "infinite": false, "number": 0}, "signal": {"id": {"set": true, "number": 9}, "name": "KILL"}}``.
* TRES: a list of ``{"type": "gres", "name": "gpu", "id": 1001, "count": 8}`` records, or a TRES
  string ``cpu=16,mem=64G,gres/gpu=8,gres/gpu:h100=8`` (``squeue``'s ``tres_alloc_str``). A typed
  ``gpu:h100`` entry beside the plain ``gpu`` one names the same GPUs: the plain one is counted;
  typed ones are summed only when no plain one exists. ``gpumem``/``gpuutil`` are not GPUs.
* ``gres_detail``: one string per allocated node, e.g. ``gpu:h100:4(IDX:0-3)``,
  ``gpu:4(IDX:0,2,4-5)``, ``gpu:h100:2(IDX:N/A)``, several GRES separated by commas.
* comment: a string (older) or ``{"administrator": .., "job": .., "system": ..}`` (the ``job``
  part is the user's comment); wckey: a string or ``{"wckey": "..", "flags": [..]}``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pipelines.parsers.hostlist import expand_ranges
from pipelines.times import from_epoch

WORKLOAD_KINDS = frozenset({"training", "inference", "notebook", "batch", "benchmark", "unknown"})
_EMPTY_TEXT = frozenset({"", "(null)", "none assigned", "n/a"})
_IDX = re.compile(r"IDX:([^)]*)\)")


def number(value: Any) -> int | float | None:
    """A plain number or a ``{"set", "infinite", "number"}`` object; unset/infinite -> None."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {value!r}")
    if isinstance(value, int | float):
        return value
    if isinstance(value, dict):
        if value.get("set", True) is False or value.get("infinite") is True:
            return None
        inner = value.get("number")
        if isinstance(inner, dict):
            raise ValueError("nested number object")
        return number(inner)
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,20}", value.strip()):
        return int(value)
    raise ValueError(f"expected a number, got {str(value)[:40]!r}")


def integer(value: Any) -> int | None:
    result = number(value)
    return None if result is None else int(result)


def epoch(value: Any) -> datetime | None:
    """Epoch seconds in either number shape; 0 (or negative) means unset."""
    seconds = number(value)
    if seconds is None or seconds <= 0:
        return None
    return from_epoch(seconds)


def text(value: Any) -> str | None:
    """A non-empty string; Slurm's empty spellings (``""``, ``(null)``, ``None assigned``) -> None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError(f"expected a string, got {type(value).__name__}")
    result = str(value).strip()
    return None if result.lower() in _EMPTY_TEXT else result


def states(value: Any) -> tuple[str, ...]:
    """Job state as a tuple of upper-case words: ``"FAILED"`` or ``["RUNNING", "REQUEUED"]``."""
    if isinstance(value, str):
        words = value.upper().split()
        if not words:
            raise ValueError("empty job state")
        return (words[0],)  # "CANCELLED by 1234" as sacct's text output spells it
    if isinstance(value, list) and value and all(isinstance(item, str) and item.strip() for item in value):
        return tuple(item.strip().upper() for item in value)
    raise ValueError(f"job state must be a string or a list of strings, got {str(value)[:60]!r}")


def exit_info(value: Any) -> tuple[int | None, int | None]:
    """``(return_code, signal)`` from either exit-code shape, or from the bare number ``squeue --json``
    of data_parser v0.0.38 (Slurm 22.05) prints: the job's wait status, ``code << 8`` or the signal."""
    if value is None:
        return None, None
    if isinstance(value, int) and not isinstance(value, bool):
        if value & 0x7F:
            return 0, value & 0x7F
        return value >> 8, None
    if not isinstance(value, dict):
        raise ValueError(f"exit_code must be an object, got {type(value).__name__}")
    code = integer(value.get("return_code"))
    signal_obj = value.get("signal")
    signal: int | None = None
    if isinstance(signal_obj, dict):
        signal = integer(signal_obj.get("id", signal_obj.get("signal_id")))
    elif signal_obj is not None:
        signal = integer(signal_obj)
    return code, (signal or None)


def gpu_tres(value: Any) -> tuple[int, str | None]:
    """``(gpu count, gpu type)`` from a TRES list or string, counting typed/plain GPUs once."""
    plain: int | None = None
    typed: dict[str, int] = {}
    for kind, name, count in _tres_entries(value):
        if kind != "gres":
            continue
        if name == "gpu":
            plain = (plain or 0) + count
        elif name.startswith("gpu:"):
            typed[name[4:]] = typed.get(name[4:], 0) + count
    total = plain if plain is not None else sum(typed.values())
    gpu_type = max(sorted(typed), key=lambda key: typed[key]) if typed else None
    return total, gpu_type


def gpu_per_spec(value: Any) -> int:
    """GPUs in a ``tres_per_job``/``tres_per_node`` spec: ``gres/gpu:4``, ``gres/gpu:h100:4``, ``gres:gpu:4``."""
    spec = text(value)
    total = 0
    for part in (spec or "").split(","):
        words = part.strip().replace("gres/", "gres:", 1).split(":")
        if len(words) >= 2 and words[0] == "gres" and words[1] == "gpu":
            amount = words[-1] if len(words) > 2 else "1"
            if not amount.isdecimal():
                raise ValueError(f"bad GPU spec {part[:40]!r}")
            total += int(amount)
    return total


def _tres_entries(value: Any) -> list[tuple[str, str, int]]:
    if value is None or value == "":
        return []
    entries: list[tuple[str, str, int]] = []
    if isinstance(value, str):
        for part in value.split(","):
            key, _, amount = part.strip().partition("=")
            kind, _, name = key.partition("/")
            if kind == "gres":
                entries.append((kind, name, _count(amount)))
        return entries
    if not isinstance(value, list):
        raise ValueError(f"TRES must be a list or a string, got {type(value).__name__}")
    for item in value:
        if not isinstance(item, dict):
            raise ValueError("TRES entry is not an object")
        item_kind, item_name = item.get("type"), item.get("name") or ""
        if not isinstance(item_kind, str) or not isinstance(item_name, str):
            raise ValueError("TRES entry without string type/name")
        if item_kind == "gres":
            entries.append((item_kind, item_name, _count(item.get("count"))))
    return entries


def _count(value: Any) -> int:
    result = integer(value)
    if result is None or result < 0:
        raise ValueError(f"bad TRES count {value!r}")
    return result


@dataclass(frozen=True)
class NodeGres:
    """The GPUs one node holds, from one ``gres_detail`` string."""

    count: int = 0
    gpu_type: str | None = None
    indices: list[int] = field(default_factory=list)


def gres_detail(value: Any) -> list[NodeGres] | None:
    """Per-node GPU detail (one entry per node in node-list order), or None when absent."""
    if value is None or value == []:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError("gres_detail must be a list of strings")
    return [_node_gres(item) for item in value]


def _node_gres(detail: str) -> NodeGres:
    count, gpu_type, indices = 0, None, []
    for entry in _split_outside_parens(detail):
        head = entry.split("(", 1)[0].strip()
        parts = head.split(":")
        if parts[0] != "gpu":
            continue
        match = _IDX.search(entry)
        idx = match.group(1).strip() if match else ""
        these = [] if idx in ("", "N/A") else expand_ranges(idx)
        rest = parts[1:]
        amount = int(rest.pop()) if rest and rest[-1].isdecimal() else len(these)
        if len(rest) > 1:
            raise ValueError(f"bad gres_detail entry {entry[:60]!r}")
        count += amount
        gpu_type = gpu_type or (rest[0] if rest and rest[0] else None)
        indices.extend(these)
    return NodeGres(count=count, gpu_type=gpu_type, indices=indices)


def _split_outside_parens(text_value: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for pos, char in enumerate(text_value):
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            parts.append(text_value[start:pos])
            start = pos + 1
    parts.append(text_value[start:])
    return [part for part in parts if part.strip()]


def comment(value: Any) -> str | None:
    """The user's job comment: a string, or the ``job`` part of the comment object."""
    if isinstance(value, dict):
        return text(value.get("job"))
    return text(value)


def wckey(value: Any) -> str | None:
    if isinstance(value, dict):
        return text(value.get("wckey"))
    return text(value)


def comment_token(comment_text: str | None, key: str) -> str | None:
    """The value of a ``key=value`` token in a comment (tokens split by spaces, commas, semicolons)."""
    if not comment_text:
        return None
    for token in re.split(r"[\s,;]+", comment_text):
        name, sep, token_value = token.partition("=")
        if sep and name.strip().lower() == key and token_value.strip():
            return token_value.strip()
    return None


def node_gpus(value: Any) -> tuple[int | None, str | None]:
    """A node's GPUs from its configured gres (``gpu:h100:8(S:0-1)``, ``gpu:8``, ``gpu:a:4,gpu:b:4``,
    ``gpu:h100:8(S:0-1),nic:2``): (count, most common type), or (None, None) when it names no GPU."""
    spec = text(value)
    if not spec or spec == "(null)":
        return None, None
    total: int | None = None
    typed: dict[str, int] = {}
    for entry in _split_outside_parens(spec):
        words = entry.split("(", 1)[0].strip().split(":")
        if not words or words[0] != "gpu":
            continue
        amount = words[-1] if len(words) > 1 else "1"
        if not amount.isdecimal():
            raise ValueError(f"bad gres entry {entry[:40]!r}")
        total = (total or 0) + int(amount)
        if len(words) > 2:
            typed[words[1]] = typed.get(words[1], 0) + int(amount)
    gpu_type = max(sorted(typed), key=lambda key: typed[key]) if typed else None
    return total, gpu_type
