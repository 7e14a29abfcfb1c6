"""Fact rows as columns: what a range's attribution gives, and the one Arrow block a step inserts.

Both paths give their facts as :class:`FactColumns` (the ``gpu_usage_facts`` columns but the
version, :data:`FACT_SCHEMA`): the vectorised one builds them from its arrays (``vector_facts``),
the scalar one from its dicts (:func:`from_dicts`). The attribution step joins a group's columns,
adds the step's version and inserts them as one Arrow block (:func:`table`);
:meth:`FactColumns.to_dicts` gives the rows back as dicts (readers and tests compare those).

A fact id is the first 32 hex digits of the SHA-256 of ``fact``, the cluster, the node,
``repr(float(window start))``, the slot, the kind, the scheduler, the job and the attempt, joined
by ``\\x1f`` (:func:`fact_id`); a step writing the same row again writes the same id.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

TIME = pa.timestamp("us", tz="UTC")
FACT_SCHEMA = pa.schema(
    [
        ("fact_id", pa.string()),
        ("cluster", pa.string()),
        ("window_start", TIME),
        ("window_seconds", pa.uint32()),
        ("node", pa.string()),
        ("gpu_uuid", pa.string()),
        ("slot", pa.string()),
        ("gpu_model", pa.string()),
        ("kind", pa.string()),
        ("scheduler", pa.string()),
        ("job_id", pa.string()),
        ("logical_job", pa.string()),
        ("attempt", pa.uint16()),
        ("namespace", pa.string()),
        ("account", pa.string()),
        ("user", pa.string()),
        ("queue", pa.string()),
        ("workload_kind", pa.string()),
        ("team_label", pa.string()),
        ("model", pa.string()),
        ("gpu_seconds", pa.float64()),
        ("busy_seconds", pa.float64()),
        ("unobserved_seconds", pa.float64()),
        ("energy_joules", pa.float64()),
    ]
)
FACT_KEYS = tuple(FACT_SCHEMA.names)


def window_prefix(cluster: str, node: str, w0: float) -> str:
    """What every fact id of one node's window starts with (see :func:`fact_id`)."""
    return f"fact\x1f{cluster}\x1f{node}\x1f{float(w0)!r}\x1f"


def owner_suffix(scheduler: str, job_id: str, attempt: int) -> str:
    """What every fact id of one owner ends with (see :func:`fact_id`)."""
    return f"\x1f{scheduler}\x1f{job_id}\x1f{attempt}"


def hashed(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def fact_id(cluster: str, node: str, w0: float, slot: str, kind: str, scheduler: str, job_id: str, attempt: int) -> str:
    """A fact row's id; ``float(w0)`` gives one id whether w0 came as int or float."""
    return hashed(f"{window_prefix(cluster, node, w0)}{slot}\x1f{kind}{owner_suffix(scheduler, job_id, attempt)}")


@dataclass(frozen=True)
class FactColumns:
    """Fact rows of one range as columns: each name of :data:`FACT_KEYS` → one numpy array (strings
    as object arrays, ``window_start`` as epoch microseconds). Ranges are joined by :func:`table`,
    so a step builds one Arrow block however many nodes it wrote."""

    columns: dict[str, np.ndarray[Any, Any]]

    def __len__(self) -> int:
        return len(self.columns["fact_id"])

    def to_dicts(self) -> list[dict[str, Any]]:
        """The rows as dicts keyed by :data:`FACT_KEYS`, in order (``node_range.fact_dict``'s)."""
        rows: list[dict[str, Any]] = table([self]).select(list(FACT_KEYS)).to_pylist()
        return rows


def from_dicts(rows: Sequence[dict[str, Any]]) -> FactColumns:
    """Fact dicts (``node_range.fact_dict``) as columns."""
    columns: dict[str, np.ndarray[Any, Any]] = {}
    for name in FACT_KEYS:
        values = [r[name] for r in rows]
        if name == "window_start":
            columns[name] = micros(np.array([v.timestamp() for v in values], dtype=np.float64))
        else:
            columns[name] = np.array(values, dtype=dtype(name))
    return FactColumns(columns)


def micros(seconds: np.ndarray[Any, Any]) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Epoch seconds (window starts: whole microseconds) as epoch microseconds."""
    return np.round(np.asarray(seconds, dtype=np.float64) * 1e6).astype(np.int64)


def table(parts: Sequence[FactColumns], version: int | None = None) -> pa.Table:
    """The rows of ``parts``, in order, as one :data:`FACT_SCHEMA` table (with a ``version`` column
    when given: the warehouse keeps the highest per fact id)."""
    arrays = []
    for f in FACT_SCHEMA:
        values = np.concatenate([p.columns[f.name] for p in parts or [EMPTY]])
        arrays.append(pa.array(values, pa.int64()).cast(TIME) if f.name == "window_start" else pa.array(values, f.type))
    out = pa.Table.from_arrays(arrays, schema=FACT_SCHEMA)
    if version is None:
        return out
    return out.append_column("version", pa.array(np.full(out.num_rows, version, dtype=np.uint64)))


def dtype(name: str) -> Any:
    """The numpy type of a column of :class:`FactColumns` (strings: object)."""
    return _NUMPY.get(name, object)


_NUMPY: dict[str, Any] = {
    "window_seconds": np.uint32,
    "attempt": np.uint16,
    "gpu_seconds": np.float64,
    "busy_seconds": np.float64,
    "unobserved_seconds": np.float64,
    "energy_joules": np.float64,
}
EMPTY = from_dicts([])
