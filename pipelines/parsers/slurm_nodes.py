"""Slurm node states (``scontrol show nodes --json``, ``sinfo --json``) -> ``node.state`` events.

Accepted shapes:

* ``{"nodes": [{"name": "gpu001", "state": ["IDLE", "DRAIN"], "reason": "xid 79",
  "reason_changed_at": 1767225600}]}`` — ``scontrol show nodes --json`` and the ``sinfo --json``
  of Slurm 21.08 (openapi v0.0.37) to 23.02; ``state`` may also be a string, lowercase in v0.0.37
  (``mixed``), with the flags in ``state_flags`` (older), and
  ``reason_changed_at`` a ``{"set", "infinite", "number"}`` object (v0.0.40+).
* ``{"sinfo": [{"nodes": {"nodes": ["gpu[001-002]"]}, "node": {"state": ["IDLE", "DRAIN"]},
  "reason": {"description": "..", "time": ..}}]}`` — ``sinfo --json`` of v0.0.40+, and ``sinfo -N
  --json`` from data_parser v0.0.39 on (one row per node).

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

from datetime import datetime
from typing import Any, NamedTuple

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
            gpus, gpu_model = f.node_gpus(_gres(row))
            nodes = _read_row(row)
            dated = [(node, time) for node in nodes if (time := _time(node, observed_at, documented))]
            objs = [
                node_state_envelope(
                    source="slurm",
                    cluster=cluster,
                    node=node.name,
                    state=node.state,
                    time=time,
                    reason=node.reason,
                    gpus=gpus,
                    gpu_model=gpu_model,
                )
                for node, time in dated
            ]
        except RECORD_ERRORS as exc:
            result.reject(topic=TOPIC.name, source="slurm", reason=str(exc), raw=raw, origin=origin)
            continue
        undated += len(nodes) - len(dated)
        add_record_events(result, objs, topic=TOPIC.name, source="slurm", raw=raw, origin=origin)
    if undated:
        result.note(
            f"{undated} node(s) carry no time of their state: give the poll time with "
            "`gpuledger ingest slurm --time <RFC 3339>`"
        )
    return result


class _Node(NamedTuple):
    name: str
    state: str  # up | drained | down
    reason: str | None  # None when up
    changed: datetime | None  # when the reason was set


def _time(node: _Node, observed_at: datetime | None, documented: datetime | None) -> datetime | None:
    """The poll time, else the reason's time for a node that is not up, else the document's last_update."""
    return observed_at or (node.changed if node.state != "up" else None) or documented


def _read_row(row: dict[str, Any]) -> list[_Node]:
    if isinstance(row.get("node"), dict) or isinstance(row.get("nodes"), dict):  # sinfo (-N) v0.0.39+
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
    return [_Node(name, state, reason if state != "up" else None, changed) for name in names]


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
