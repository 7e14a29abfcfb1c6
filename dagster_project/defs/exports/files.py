"""FOCUS rows to files: CSV (UTF-8, header, empty field = null) or Parquet (typed columns).

Files of a period: ``focus-chargeback-YYYY-MM.<ext>`` with every row (business units and the
platform's remainder, which reconcile to the period's total) and one
``focus-chargeback-YYYY-MM-<business unit>.<ext>`` per business unit holding only its rows.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from dagster_project.defs.exports.focus_spec import HEADER, KINDS

FileFormat = Literal["csv", "parquet"]
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def file_name(period: str, fmt: FileFormat, business_unit: str | None = None) -> str:
    suffix = f"-{_SAFE.sub('_', business_unit)}" if business_unit is not None else ""
    return f"focus-chargeback-{period}{suffix}.{fmt}"


def write(rows: Sequence[dict[str, Any]], path: Path, fmt: FileFormat) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    if fmt == "csv":
        with tmp.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(HEADER), lineterminator="\n")
            writer.writeheader()
            for row in rows:
                writer.writerow({k: "" if v is None else v for k, v in row.items()})
    else:
        pq.write_table(_table(rows), tmp)
    tmp.replace(path)  # readers never see a half-written file
    return path


def _arrow_type(kind: str) -> pa.DataType:
    return pa.decimal128(38, 12) if kind == "decimal" else pa.string()


def _table(rows: Sequence[dict[str, Any]]) -> pa.Table:
    arrays = []
    for name in HEADER:
        kind = KINDS[name]
        values = [row.get(name) for row in rows]
        if kind == "decimal":
            values = [None if v is None else Decimal(v) for v in values]
        arrays.append(pa.array(values, type=_arrow_type(kind)))
    return pa.Table.from_arrays(arrays, names=list(HEADER))


def read(path: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """A written file back as (header, rows of text values; null → None) — for checks and tests."""
    if path.suffix == ".csv":
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            rows = [{k: (v if v != "" else None) for k, v in r.items()} for r in reader]
            return list(reader.fieldnames or []), rows
    table = pq.read_table(path)
    out = []
    for rec in table.to_pylist():
        out.append(
            {
                k: (None if v is None else (format(v.normalize(), "f") if isinstance(v, Decimal) else v))
                for k, v in rec.items()
            }
        )
    return list(table.column_names), out
