"""Slurm node states (``scontrol show nodes --json``, ``sinfo --json``) -> ``node.state`` events.

Accepted shapes:

* ``{"nodes": [{"name": "gpu001", "state": ["IDLE", "DRAIN"], "reason": "xid 79",
  "reason_changed_at": 1767225600}]}`` — ``scontrol show nodes --json`` and the ``sinfo --json``
  of Slurm 23.02; ``state`` may also be a string with the flags in ``state_flags`` (older), and
  ``reason_changed_at`` a ``{"set", "infinite", "number"}`` object (v0.0.40+).
* ``{"sinfo": [{"nodes": {"nodes": ["gpu[001-002]"]}, "node": {"state": ["IDLE", "DRAIN"]},
  "reason": {"description": "..", "time": ..}}]}`` — ``sinfo --json`` of v0.0.40+.

State: ``DOWN``, ``INVALID``, ``INVALID_REG`` -> ``down``; ``DRAIN``, ``DRAINED``, ``DRAINING``,
``FAIL``, ``FAILING`` -> ``drained``; anything else (IDLE, MIXED, ALLOCATED, …) -> ``up``.
``FUTURE`` nodes (not yet in service) are skipped.

GPUs: the node's configured gres (``gres``: ``gpu:h100:8(S:0-1)``; sinfo v0.0.40+ ``gres.total``),
counted once per entry and summed over typed entries, become the event's ``gpus`` and ``gpu_model``
(the physical inventory the attribution counts capacity against).

Time: the ``observed_at`` hint (the poll time the live collector passes, or ``gpuledger ingest
--time``) when given; otherwise the time the reason was set, for a drained or down node; otherwise
the document's own ``last_update`` (a number or a ``{"set", "number"}`` object: the node table as
of then), so a file of nodes that are up still ends a drain. A node with none of these carries no
dated fact and is skipped, and the result says so in a note.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pipelines import topics
from pipelines.parsers import slurm_fields as f
from pipelines.parsers.base import ParseResult
from pipelines.parsers.hostlist import expand
from pipelines.parsers.sched_events import (
    RECORD_ERRORS,
    add_record_events,
    as_dict,
    node_state_envelope,
    raw_text,
)

DOWN = frozenset({"DOWN", "INVALID", "INVALID_REG"})
DRAINED = frozenset({"DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING"})
TOPIC = topics.SCHEDULER_ALLOCATIONS


def is_node_document(doc: dict[str, Any]) -> bool:
    return isinstance(doc.get("nodes"), list) or isinstance(doc.get("sinfo"), list)


def parse_nodes(doc: dict[str, Any], *, cluster: str, origin: str | None, observed_at: datetime | None) -> ParseResult:
    """One ``node.state`` event per node (and per sinfo row's node)."""
    result = ParseResult()
    try:
        documented = f.epoch(doc.get("last_update"))
    except RECORD_ERRORS as exc:
        documented = None
        result.reject(
            topic=TOPIC.name,
            source="slurm",
            reason=f"last_update: {exc}",
            raw=raw_text(doc.get("last_update")),
            origin=origin,
        )
    undated = 0
    rows = doc.get("nodes") if isinstance(doc.get("nodes"), list) else doc.get("sinfo")
    for row in rows or []:
        raw = raw_text(row)
        try:
            if not isinstance(row, dict):
                raise ValueError("node record is not an object")
            objs = [
                node_state_envelope(
                    source="slurm",
                    cluster=cluster,
                    node=node,
                    state=state,
                    time=time,
                    reason=reason,
                    gpus=gpus,
                    gpu_model=gpu_model,
                )
                for node, state, reason, time in _read_row(row, observed_at, documented)
                for gpus, gpu_model in [f.node_gpus(_gres(row))]
            ]
        except RECORD_ERRORS as exc:
            result.reject(topic=TOPIC.name, source="slurm", reason=str(exc), raw=raw, origin=origin)
            continue
        undated += not objs and _undated(row)
        add_record_events(result, objs, topic=TOPIC.name, source="slurm", raw=raw, origin=origin)
    if undated:
        result.note(
            f"{undated} node record(s) that are up carry no time: give the poll time with "
            "`gpuledger ingest slurm --time <RFC 3339>`"
        )
    return result


def _undated(row: dict[str, Any]) -> bool:
    """A row that gave no event only because nothing dates it (not a FUTURE node)."""
    return bool(_read_row(row, None, _NO_TIME_CHECK))


Row = tuple[str, str, str | None, datetime]  # node, state, reason, time
_NO_TIME_CHECK = datetime(1970, 1, 1, tzinfo=UTC)  # any time: does the row name a node at all?


def _read_row(row: dict[str, Any], observed_at: datetime | None, documented: datetime | None) -> list[Row]:
    if isinstance(row.get("node"), dict) or isinstance(row.get("nodes"), dict):  # sinfo v0.0.40+
        words = _words(as_dict(row.get("node")).get("state"), None)
        reason_obj = as_dict(row.get("reason"))
        reason, changed = f.text(reason_obj.get("description")), f.epoch(reason_obj.get("time"))
        listed = as_dict(row.get("nodes")).get("nodes") or []
        if not isinstance(listed, list):
            raise ValueError("sinfo nodes.nodes is not a list")
        names = [name for item in listed for name in expand(_name(item))]
    else:
        words = _words(row.get("state"), row.get("state_flags"))
        reason, changed = f.text(row.get("reason")), f.epoch(row.get("reason_changed_at"))
        names = [_name(row.get("name"))]
    if "FUTURE" in words:
        return []
    state = "down" if words & DOWN else "drained" if words & DRAINED else "up"
    time = observed_at or (changed if state != "up" else None) or documented
    if time is None:
        return []
    return [(name, state, reason if state != "up" else None, time) for name in names]


def _gres(row: dict[str, Any]) -> Any:
    gres = row.get("gres")
    return as_dict(gres).get("total") if isinstance(gres, dict) else gres


def _words(state: Any, flags: Any) -> set[str]:
    words = set(f.states(state)) if state not in (None, "", []) else set()
    if isinstance(state, str):
        words |= set(state.upper().replace("+", " ").split())  # "IDLE+DRAIN" as older output spells it
    if isinstance(flags, list):
        words |= {str(flag).upper() for flag in flags}
    if not words:
        raise ValueError("node without a state")
    return words


def _name(value: Any) -> str:
    name = f.text(value)
    if name is None:
        raise ValueError("node without a name")
    return name
