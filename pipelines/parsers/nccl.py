"""nccl-tests stdout → ``benchmark.run`` events (source ``nccl``, topic ``benchmarks.runs``).

Any layout from nccl-tests 2.10 on is read; the result table is read by its own header line, so
column sets differ freely between versions and collectives:

* header ``# nThread … nGpus … minBytes … validation: 1 [graph: 0] [unalign: 0]``; from 2.13 on a
  ``# nccl-tests version 2.13.8 nccl-headers=21903 nccl-library=21903`` line, later also
  ``# Collective test starting: all_reduce_perf`` / ``# Collective test concluded: …``;
* device lines ``#  Rank  0 Group  0 Pid  12345 on node001 device  0 [0x1b] NVIDIA H100 80GB HBM3``
  (older without ``Group``; newer print the bus id as ``[0000:1b:00]``);
* NCCL's own ``NCCL version 2.19.3+cuda12.3`` line (bare or inside an ``NCCL INFO`` line);
* the table: ``size count type [redop] [root] time algbw busbw #wrong|error`` for out-of-place
  then in-place (``cputime`` instead of ``time`` with ``-C 1``). Old layouts print only the columns
  the collective has and an ``error`` column (max. deviation, e.g. ``0e+00``); newer ones print
  all columns, ``none`` as redop and ``-1`` as root where they do not apply, and ``#wrong``
  (wrong elements, ``N/A`` when not checked);
* footer ``# Out of bounds values : 0 OK`` and ``# Avg bus bandwidth    : 123.456 [OK|FAILED]``.

Several runs concatenated in one log are split at the first header line after a run's body; text
between runs (a wrapper's ``Started: <RFC 3339>`` line, MPI noise) belongs to the following run.

Decisions where the format is silent:

* ``redop`` ``none`` and ``root`` ``-1`` are stored as ``None``, as when the column is absent, so
  every layout gives the same results for the same run. ``#wrong`` ``N/A`` is ``None``; old-layout
  ``error`` values are not wrong-element counts, so ``*_wrong`` stays ``None`` there.
* ``ok``: at least one result row, no wrong elements, the footer printed with 0 out-of-bounds
  values (a log without it was cut short), the average bandwidth not marked ``FAILED``, no
  unreadable result row, and in the old layout no ``error`` above nccl-tests' own limit for the
  type (float 1e-5, double 1e-12, half/bfloat16 5e-2, integers 0). A slow run is still ``ok``:
  degradation is judged downstream from ``avg_busbw_gbps``.
* Open MPI's ``--tag-output`` prefix (``[1,0]<stdout>:``, ``<stderr>``, ``<stddiag>``) is dropped
  from every line before anything is read.
* Collective: the ``Collective test starting`` line, else the ``collective`` hint (``gpuledger
  ingest nccl --collective``), else a known ``<collective>_perf`` binary named anywhere in the run's
  text, else inferred from the table (:func:`pipelines.parsers.nccl_table.infer`), else ``unknown``.
* A run that dies (``Test CUDA failure …``, ``Test NCCL failure …``, ``Test failure …``) is one
  run that is not ``ok``, and one dead letter (the first failure line: the row it cut short, or
  the line before the table) whose reason is the failure message.
* NCCL version: the ``NCCL version`` line, else decoded from ``nccl-library=<code>``.
* Time (event time and ``started``): the ``time`` hint, else the first RFC 3339 time with offset
  printed in the run's text; without either the run is a dead letter that names ``--time``.
* ``run_id``: the ``run_id`` hint (``<hint>#<n>`` when the log holds several runs), else
  ``event_id`` over cluster, hosts, the first device's pid and the run's text. Event id:
  ``event_id("benchmark.run", cluster, run_id)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pipelines.events import event_id
from pipelines.parsers import prom
from pipelines.parsers.base import NotThisFormat, ParseResult
from pipelines.parsers.nccl_table import ERROR_LIMIT, cell, columns, header, infer, to_float
from pipelines.times import parse_rfc3339, time_hint
from pipelines.topics import BENCHMARKS_RUNS

SOURCE = "nccl"
TOPIC = BENCHMARKS_RUNS.name
KNOWN = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "reduce",
    "alltoall",
    "alltoallv",
    "sendrecv",
    "scatter",
    "gather",
    "hypercube",
)

_START = re.compile(r"^#\s*(?:nccl-tests version\b|Collective test starting:|nThread\s+\d)")
_TESTS_VERSION = re.compile(r"^#\s*nccl-tests version\s+(\S+)")
_LIB_CODE = re.compile(r"nccl-library=([0-9]{1,9})\b")
_COLLECTIVE = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_CONCLUDED = re.compile(r"^#\s*Collective test concluded")
_NCCL_VERSION = re.compile(r"\bNCCL version\s+(\d+\.\d+\.\d+\S*)")
_DEVICE = re.compile(
    r"^#\s*Rank\s+([0-9]{1,9})\s+(?:Group\s+[0-9]+\s+)?Pid\s+([0-9]{1,12})\s+on\s+(\S+)"
    r"\s+device\s+([0-9]{1,9})\s+\[([^\]]*)\]\s*(.*)$"
)
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*([0-9]{1,9})\s*(\w*)")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)\s*(\w*)")
_BINARY = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(sorted(KNOWN, key=len, reverse=True)) + r")_perf(?:_mpi)?\b")
_STAMP = re.compile(r"\b(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2}))")
_TAG = re.compile(r"^\[\d+,\d+\]<(?:stdout|stderr|stddiag)>:")
_FAILURE = re.compile(r"\bTest (?:CUDA |NCCL )?failure\b.*$")


def parse(data: bytes | str, *, cluster: str, origin: str | None = None, **hints: Any) -> ParseResult:
    """Hints: ``time`` (run start), ``collective``, ``run_id``."""
    text = prom.as_text(data)
    lines = [_TAG.sub("", line.rstrip("\r"), count=1) for line in text.split("\n")]
    if not any(_marker(line.strip()) for line in lines):
        raise NotThisFormat("no nccl-tests header, device, table or footer line")
    runs = [r for r in _split(lines) if any(_marker(line.strip()) for line in r)]
    when = time_hint(hints.get("time"))
    result = ParseResult()
    for n, run_lines in enumerate(runs, 1):
        run = _Run()
        for line in run_lines:
            reason = run.feed(line.strip())
            if reason:
                result.reject(topic=TOPIC, source=SOURCE, reason=reason, raw=line, origin=origin)
        run_id = str(hints["run_id"]) if hints.get("run_id") else None
        if run_id and len(runs) > 1:
            run_id = f"{run_id}#{n}"
        collective = _strip_binary(str(hints["collective"])) if hints.get("collective") else None
        _emit(
            run,
            "\n".join(run_lines),
            result,
            cluster=cluster,
            origin=origin,
            when=when,
            run_id=run_id,
            collective=collective,
        )
    return result


def _marker(s: str) -> bool:
    return bool(_START.match(s) or _DEVICE.match(s) or header(s) or _OOB.match(s) or _AVG.match(s))


def _rowlike(s: str) -> bool:
    tokens = s.split()
    return len(tokens) >= 7 and tokens[0].isdecimal() and tokens[1].isdecimal()


def _split(lines: list[str]) -> list[list[str]]:
    """Cut a log into runs: a header line after a run's body starts the next run."""
    runs: list[list[str]] = []
    cur: list[str] = []
    tail: list[str] = []  # lines after a footer: the next run's preamble, unless the footer goes on
    body = done = False
    for line in lines:
        s = line.strip()
        footer = bool(_OOB.match(s) or _AVG.match(s) or _CONCLUDED.match(s))
        if _START.match(s) and body:
            runs.append(cur)
            cur, tail, body, done = tail, [], False, False
        if done and not footer:
            tail.append(line)
            continue
        cur.extend(tail)
        tail = []
        cur.append(line)
        body = body or footer or bool(_DEVICE.match(s) or header(s) or _rowlike(s))
        done = done or footer
    runs.append(cur + tail)
    return runs


@dataclass
class _Run:
    columns: list[str] | None = None
    devices: list[dict[str, Any]] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    collective: str | None = None
    binary: str | None = None
    tests_version: str | None = None
    nccl_version: str | None = None
    library_code: int | None = None
    stamp: str | None = None
    out_of_bounds: int | None = None
    avg: float | None = None
    failed_flags: int = 0  # footer FAILED marks, unreadable rows, old-layout errors over the limit
    failure: str | None = None  # the first "Test … failure" message: the run died

    def feed(self, s: str) -> str | None:
        """Take one stripped line; a dead-letter reason when it is an unreadable result row."""
        if (m := _FAILURE.search(s)) is not None:  # the first one is the run's one dead letter
            self.failed_flags += 1
            if self.failure is not None:
                return None
            self.failure = m.group(0).strip()
            where = f" at size {s.split()[0]}" if self.columns is not None and _rowlike(s) else ""
            return f"nccl-tests run died{where}: {self.failure}"
        if self.columns is not None and _rowlike(s):
            return self._row(s)
        if (m := _DEVICE.match(s)) is not None:
            rank, pid, host, dev, bus, name = m.groups()
            self.devices.append(
                {
                    "rank": int(rank),
                    "host": host,
                    "pid": int(pid),
                    "device": int(dev),
                    "bus_id": bus.strip() or None,
                    "name": name.strip() or None,
                }
            )
        elif (cols := header(s)) is not None:
            return self._columns(cols)
        elif (m := _OOB.match(s)) is not None:
            self.out_of_bounds = int(m.group(1))
            self.failed_flags += int(m.group(2) == "FAILED")
        elif (m := _AVG.match(s)) is not None:
            self.avg = to_float(m.group(1))
            self.failed_flags += int(m.group(2) == "FAILED")
        else:
            self._meta(s)
        return None

    def _meta(self, s: str) -> None:
        if (m := _COLLECTIVE.match(s)) is not None:
            self.collective = self.collective or _strip_binary(m.group(1))
        if (m := _TESTS_VERSION.match(s)) is not None:
            self.tests_version = self.tests_version or m.group(1)
            code = _LIB_CODE.search(s)
            self.library_code = int(code.group(1)) if code else None
        if self.nccl_version is None and (m := _NCCL_VERSION.search(s)) is not None:
            self.nccl_version = m.group(1)
        if self.binary is None and (m := _BINARY.search(s)) is not None:
            self.binary = m.group(1)
        if self.stamp is None and (m := _STAMP.search(s)) is not None:
            self.stamp = m.group(1)

    def _columns(self, tokens: list[str]) -> str | None:
        self.columns = columns(tokens)
        return None if self.columns is not None else "unrecognised nccl-tests table header"

    def _row(self, s: str) -> str | None:
        assert self.columns is not None
        tokens = s.split()
        if len(tokens) != len(self.columns):
            self.failed_flags += 1
            return f"result row has {len(tokens)} fields, the table header {len(self.columns)}"
        row: dict[str, Any] = {}
        try:
            for name, token in zip(self.columns, tokens, strict=True):
                row[name] = cell(name, token)
        except ValueError as exc:
            self.failed_flags += 1
            return f"result row: {exc}"
        for side in ("out_of_place", "in_place"):
            error = row.pop(f"{side}_error", None)
            if error is not None and error > ERROR_LIMIT.get(row.get("dtype", ""), 0.0):
                self.failed_flags += 1
        self.results.append({k: v for k, v in row.items() if not k.startswith("extra_")})
        return None


def _strip_binary(name: str) -> str:
    name = name.rsplit("/", 1)[-1]
    name = name.removesuffix("_mpi")
    return name.removesuffix("_perf")


def _library_version(code: int | None) -> str | None:
    if not code:
        return None
    if code >= 10000:  # NCCL >= 2.9: major*10000 + minor*100 + patch
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def _emit(
    run: _Run,
    text: str,
    result: ParseResult,
    *,
    cluster: str,
    origin: str | None,
    when: Any,
    run_id: str | None,
    collective: str | None,
) -> None:
    started = when
    if started is None and run.stamp is not None:
        try:
            started = parse_rfc3339(run.stamp)
        except ValueError:
            started = None
    if started is None:
        result.reject(
            topic=TOPIC,
            source=SOURCE,
            reason="nccl-tests run without a time: give it with "
            "`gpuledger ingest nccl --time <RFC 3339>` (e.g. the log's modification time)",
            raw=text,
            origin=origin,
        )
        return
    hosts = sorted({d["host"] for d in run.devices})
    first_pid = run.devices[0]["pid"] if run.devices else None
    run_id = run_id or event_id("nccl-run", cluster, ",".join(hosts), first_pid, text)
    wrong_total = sum(r.get(k) or 0 for r in run.results for k in ("out_of_place_wrong", "in_place_wrong"))
    data = {
        "run_id": run_id,
        "collective": run.collective or collective or run.binary or infer(run.results, len(run.devices)),
        "hosts": hosts,
        "ranks": len(run.devices),
        "devices": run.devices,
        "nccl_version": run.nccl_version or _library_version(run.library_code),
        "tests_version": run.tests_version,
        "results": run.results,
        "avg_busbw_gbps": run.avg,
        "out_of_bounds": run.out_of_bounds or 0,
        "wrong_total": wrong_total,
        "started": started,
        "ok": bool(run.results) and wrong_total == 0 and run.out_of_bounds == 0 and run.failed_flags == 0,
    }
    obj = {
        "id": event_id("benchmark.run", cluster, run_id),
        "source": SOURCE,
        "type": "benchmark.run",
        "time": started,
        "cluster": cluster,
        "data": data,
    }
    result.add(obj, topic=TOPIC, source=SOURCE, raw=text, origin=origin)
