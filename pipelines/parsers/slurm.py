"""Slurm ``sacct --json`` / ``squeue --json`` (data_parser v0.0.38 to v0.0.42) -> allocation events.

Input: ``{"meta": {...}, "errors": [...], "jobs": [...]}`` from either command (field spellings
and version shapes: :mod:`pipelines.parsers.slurm_record`, :mod:`pipelines.parsers.slurm_fields`),
or a node document from ``scontrol show nodes --json`` / ``sinfo --json``
(:mod:`pipelines.parsers.slurm_nodes`). Anything else raises ``NotThisFormat``.

Per job record (steps and het-job details are ignored: the job record carries the allocation):

* ``allocation.pending`` — job level (``node = None``) at the submit time;
* ``allocation.running`` — one per node holding GPUs, at the start time;
* ``allocation.ended`` — one per node holding GPUs, at the end time, with outcome, failure class,
  exit code and signal.

Every event carries the whole placement state; ``running`` events carry the state as it was while
running (no end, no outcome), so the same id always has the same content whether it was seen in a
live poll or in a later accounting dump.

Rules (docs/ATTRIBUTION.md):

* ``job_id`` is the Slurm id, ``<array job>_<task>`` for array tasks; ``logical_job`` = ``job_id``.
  An array task's own ``SLURM_JOB_ID`` (the record's ``job_id`` field, which dcgm-exporter's
  ``hpc_job`` label carries) is kept in ``aliases``.
* attempt = ``restart_cnt + 1``. ``sacct -D`` lists each requeued attempt as its own record with
  the same id; within one id, records are ordered by (restart_cnt, start, submit) and numbers are
  kept strictly increasing (a record whose restart_cnt does not advance gets the next number).
  Byte-identical duplicate records are parsed once.
* GPUs: allocated TRES (typed ``gpu:h100`` beside plain ``gpu`` counted once), spread evenly over
  the expanded node list (the first ``total % nodes`` nodes get one more) unless ``gres_detail``
  gives one entry per node (count, type, indices). ``requested_gpus`` = requested TRES, else
  allocated. Jobs without any GPU are skipped (no events): they hold no GPU-seconds.
* owner: account, user, partition (as queue), comment (the ``job`` part of the comment object),
  wckey, workload kind = the comment's ``kind=<kind>`` token, else the ``workload_kind`` hint,
  else ``batch``.

Hints: ``workload_kind`` (default kind for jobs without a ``kind=`` comment), ``observed_at``
(poll time, used for node states).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import orjson

from pipelines import topics
from pipelines.parsers import slurm_fields as f
from pipelines.parsers.base import NotThisFormat, ParseResult, gc_paused
from pipelines.parsers.sched_events import (
    RECORD_ERRORS,
    add_record_events,
    allocation_envelope,
    decode_text,
    hint_time,
    raw_text,
)
from pipelines.parsers.slurm_nodes import is_node_document, parse_nodes
from pipelines.parsers.slurm_record import Classified, JobRecord, classify, read_record
from pipelines.times import EPOCH

TOPIC = topics.SCHEDULER_ALLOCATIONS
SOURCE = "slurm"


def parse(data: bytes | str, *, cluster: str, origin: str | None = None, **hints: Any) -> ParseResult:
    """Parse one ``sacct``/``squeue``/``scontrol show nodes``/``sinfo`` JSON document."""
    with gc_paused(data):
        return _parse(data, cluster=cluster, origin=origin, hints=hints)


def _parse(data: bytes | str, *, cluster: str, origin: str | None, hints: dict[str, Any]) -> ParseResult:
    doc = _load(data)
    default_kind = _kind_hint(hints.get("workload_kind"))
    if isinstance(doc.get("jobs"), list):
        result = ParseResult()
        _reject_reported_errors(doc, result, origin)
        records = _read_records(doc["jobs"], result, origin)
        without_gpu = 0
        for record, raw, attempt in _with_attempts(records):
            try:
                objs = job_events(record, attempt, cluster=cluster, default_kind=default_kind)
            except RECORD_ERRORS as exc:
                result.reject(topic=TOPIC.name, source=SOURCE, reason=str(exc), raw=raw, origin=origin)
                continue
            without_gpu += not objs and not _holds_gpu(record)
            add_record_events(result, objs, topic=TOPIC.name, source=SOURCE, raw=raw, origin=origin)
        if without_gpu:
            result.note(f"{without_gpu} job(s) hold no GPU: nothing to attribute")
        return result
    if is_node_document(doc):
        return parse_nodes(doc, cluster=cluster, origin=origin, observed_at=hint_time(hints))
    raise NotThisFormat("not Slurm JSON: no 'jobs' (sacct/squeue) or 'nodes'/'sinfo' list at the top level")


def _load(data: bytes | str) -> dict[str, Any]:
    text = decode_text(data, "Slurm JSON")
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise NotThisFormat(f"not Slurm JSON: {str(exc).splitlines()[0][:120]}") from None
    if not isinstance(doc, dict):
        raise NotThisFormat(f"not Slurm JSON: top level is a {type(doc).__name__}, not an object")
    return doc


def _kind_hint(value: Any) -> str | None:
    if value is not None and value not in f.WORKLOAD_KINDS:
        raise ValueError(f"workload_kind hint must be one of {sorted(f.WORKLOAD_KINDS)}, got {value!r}")
    return value


def _reject_reported_errors(doc: dict[str, Any], result: ParseResult, origin: str | None) -> None:
    """Errors Slurm itself reported in the document become dead letters (the data may be partial)."""
    errors = doc.get("errors")
    for error in errors if isinstance(errors, list) else []:
        message = error.get("description") or error.get("error") if isinstance(error, dict) else error
        result.reject(
            topic=TOPIC.name,
            source=SOURCE,
            reason=f"slurm reported an error: {message}",
            raw=raw_text(error),
            origin=origin,
        )


def _read_records(jobs: list[Any], result: ParseResult, origin: str | None) -> list[tuple[JobRecord, str]]:
    records: list[tuple[JobRecord, str]] = []
    seen: set[str] = set()
    for job in jobs:
        raw = raw_text(job)
        if raw in seen:
            continue
        seen.add(raw)
        try:
            if not isinstance(job, dict):
                raise ValueError("job record is not an object")
            records.append((read_record(job), raw))
        except RECORD_ERRORS as exc:
            result.reject(topic=TOPIC.name, source=SOURCE, reason=str(exc), raw=raw, origin=origin)
    return records


def _with_attempts(records: list[tuple[JobRecord, str]]) -> Iterable[tuple[JobRecord, str, int]]:
    """Attempt numbers: restart_cnt + 1, strictly increasing per job id in (restarts, start) order."""
    groups: dict[str, list[tuple[JobRecord, str]]] = {}
    for record, raw in records:
        groups.setdefault(record.job_id, []).append((record, raw))
    for group in groups.values():
        group.sort(key=lambda item: (item[0].restart_cnt, item[0].start or EPOCH, item[0].submit or EPOCH))
        previous = 0
        for record, raw in group:
            attempt = max(record.restart_cnt + 1, previous + 1)
            previous = attempt
            yield record, raw, attempt


def _holds_gpu(record: JobRecord) -> bool:
    return bool(record.req_gpus or record.alloc_gpus or _placements(record))


def job_events(
    record: JobRecord, attempt: int, *, cluster: str, default_kind: str | None = None
) -> list[dict[str, Any]]:
    """The envelopes (unvalidated dicts) of one job record's attempt."""
    placements = _placements(record)
    requested = record.req_gpus or record.alloc_gpus or sum(count for _, count, _, _ in placements)
    if requested == 0 and not placements:
        return []  # no GPU: nothing to attribute
    state = classify(record)
    base = _base_data(record, attempt, float(requested), default_kind)
    objs: list[dict[str, Any]] = []
    if record.submit is not None:
        objs.append(
            _envelope(
                "allocation.pending", cluster, record.submit, {**base, "state": "pending", "scheduler_state": "PENDING"}
            )
        )
    elif state.phase == "pending":
        raise ValueError("pending job without a submit time")
    if state.phase == "pending":
        return objs
    if record.start is None or not placements:
        if state.phase == "running":
            raise ValueError("running job without " + ("a start time" if record.start is None else "nodes"))
        return objs  # ended before it ever started (e.g. cancelled while pending)
    if state.phase == "ended" and record.end is None:
        raise ValueError(f"{state.scheduler_state} job without an end time")
    for node, count, gpu_type, indices in placements:
        placed = {
            **base,
            "node": node,
            "start_time": record.start,
            "gpu_indices": indices,
            "gpus": [{"kind": "gpu", "count": count, "gpu_type": gpu_type}],
        }
        objs.append(
            _envelope(
                "allocation.running",
                cluster,
                record.start,
                {**placed, "state": "running", "scheduler_state": "RUNNING"},
            )
        )
        if state.phase == "ended":
            assert record.end is not None
            objs.append(_envelope("allocation.ended", cluster, record.end, _ended(placed, record, state)))
    return objs


def _ended(placed: dict[str, Any], record: JobRecord, state: Classified) -> dict[str, Any]:
    return {
        **placed,
        "state": "ended",
        "end_time": record.end,
        "outcome": state.outcome,
        "failure_reason": state.failure_reason,
        "exit_code": record.exit_code,
        "signal": record.signal,
        "scheduler_state": state.scheduler_state,
    }


def _base_data(record: JobRecord, attempt: int, requested: float, default_kind: str | None) -> dict[str, Any]:
    kind = (f.comment_token(record.comment, "kind") or "").lower()
    owner = {
        "account": record.account,
        "user": record.user,
        "queue": record.partition,
        "comment": record.comment,
        "wckey": record.wckey,
        "workload_kind": kind if kind in f.WORKLOAD_KINDS else default_kind or "batch",
    }
    data: dict[str, Any] = {
        "scheduler": "slurm",
        "job_id": record.job_id,
        "logical_job": record.job_id,
        "job_name": record.name,
        "attempt": attempt,
        "submit_time": record.submit,
        "requested_gpus": requested,
        "owner": owner,
    }
    if record.unique_id != record.job_id and "[" not in record.job_id:  # an array task: its SLURM_JOB_ID
        data["aliases"] = [record.unique_id]
    return data


def _placements(record: JobRecord) -> list[tuple[str, int, str | None, list[int]]]:
    """``(node, gpus, gpu type, indices)`` per node holding at least one GPU."""
    nodes = record.nodes
    if record.gres and len(record.gres) == len(nodes) and any(g.count for g in record.gres):
        per = [(g.count, g.gpu_type or record.gpu_type, g.indices) for g in record.gres]
    else:
        total = record.alloc_gpus or record.req_gpus
        share, extra = divmod(total, len(nodes)) if nodes else (0, 0)
        per = [(share + (i < extra), record.gpu_type, []) for i in range(len(nodes))]
    return [(node, count, gpu_type, idx) for node, (count, gpu_type, idx) in zip(nodes, per, strict=True) if count > 0]


def _envelope(event_type: str, cluster: str, time: datetime, data: dict[str, Any]) -> dict[str, Any]:
    return allocation_envelope(source=SOURCE, event_type=event_type, cluster=cluster, time=time, data=data)
