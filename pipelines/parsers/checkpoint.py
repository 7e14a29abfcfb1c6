"""Checkpoint events written by training code → ``checkpoint`` events (topic ``storage.io``).

The format (this is the contract training code emits): JSON lines, one object per checkpoint
written or restored, UTF-8, blank lines ignored::

    {"job_id": "4815162", "attempt": 2, "kind": "write", "path": "s3://ckpt/llm/step-12000",
     "bytes": 137438953472, "started": "2025-11-02T10:14:03Z", "finished": "2025-11-02T10:16:41.250Z",
     "node": "gpu017", "cluster": "c1"}

====================  =========  ==============================================================
key                   required   meaning
====================  =========  ==============================================================
``job_id``            yes        the scheduler's job id (Slurm ``1234``/``1234_7``, Kubernetes
                                 ``<namespace>/<pod>``); a JSON integer is read as its decimal text
``attempt``           no         1-based attempt of that job (Slurm ``restart_cnt + 1``, container
                                 restart count + 1); integer ≥ 1
``kind``              no         ``"write"`` (default) or ``"restore"``
``path``              yes        where the checkpoint lives (file path or URL)
``bytes``             yes        its size; integer ≥ 0
``started``           yes        RFC 3339 time with offset or ``Z``
``finished``          yes        RFC 3339 time with offset or ``Z``; not before ``started``. A
                                 checkpoint counts as completed at ``finished``.
``node``              no         host that wrote it
``cluster``           no         overrides the ``cluster`` the parser was given, for that line
====================  =========  ==============================================================

Other keys are ignored (forward compatible). Event time is ``finished``; the id is
``event_id("checkpoint", cluster, job_id, attempt, kind, path, finished)`` with ``finished`` in
UTC, so the same checkpoint written with another offset notation deduplicates. A line that is not
a JSON object, or breaks a rule above, becomes a dead letter with the reason; the rest is parsed.
"""

from __future__ import annotations

from typing import Any

import orjson

from pipelines.events import event_id
from pipelines.parsers import prom
from pipelines.parsers.base import NotThisFormat, ParseResult, json_lines
from pipelines.times import parse_rfc3339
from pipelines.topics import STORAGE_IO

SOURCE = "checkpoint"
TOPIC = STORAGE_IO.name
_KINDS = ("write", "restore")


def looks_like(text: str) -> bool:
    """True when some line of ``text`` is a JSON object carrying ``job_id`` (the format's marker)."""
    for line in text.split("\n"):
        line = line.strip()
        if line.startswith("{") and '"job_id"' in line:
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(obj, dict) and "job_id" in obj:
                return True
    return False


def parse(data: bytes | str, *, cluster: str, origin: str | None = None, **hints: Any) -> ParseResult:
    """Parse checkpoint JSON lines (no hints are used)."""
    text = prom.as_text(data)
    if not looks_like(text):
        raise NotThisFormat("no JSON line with a job_id: not checkpoint events")
    return json_lines(
        text, lambda line, lineno: _event(line, lineno, cluster), topic=TOPIC, source=SOURCE, origin=origin
    )


def _event(line: str, lineno: int, cluster: str) -> tuple[dict[str, Any] | None, str]:
    try:
        rec = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        return None, f"line {lineno}: invalid JSON: {exc}"
    if not isinstance(rec, dict):
        return None, f"line {lineno}: not a JSON object"
    try:
        data = _data(rec)
    except (ValueError, TypeError) as exc:
        return None, f"line {lineno}: {exc}"
    line_cluster = rec.get("cluster", cluster)
    if not isinstance(line_cluster, str) or not line_cluster:
        return None, f"line {lineno}: cluster must be a non-empty string"
    key = (data["job_id"], data.get("attempt"), data["kind"], data["path"], data["finished"])
    return {
        "id": event_id("checkpoint", line_cluster, *key),
        "source": SOURCE,
        "type": "checkpoint",
        "time": data["finished"],
        "cluster": line_cluster,
        "data": data,
    }, ""


def _data(rec: dict[str, Any]) -> dict[str, Any]:
    for key in ("job_id", "path", "bytes", "started", "finished"):
        if key not in rec:
            raise ValueError(f"missing {key!r}")
    job_id = rec["job_id"]
    if isinstance(job_id, int) and not isinstance(job_id, bool):
        job_id = str(job_id)
    if not isinstance(job_id, str) or not job_id:
        raise ValueError("job_id must be a non-empty string")
    kind = rec.get("kind", "write")
    if kind not in _KINDS:
        raise ValueError(f"kind must be 'write' or 'restore', got {str(kind)[:40]!r}")
    data: dict[str, Any] = {
        "job_id": job_id,
        "kind": kind,
        "path": _str(rec, "path"),
        "bytes": _int(rec, "bytes", 0),
        "started": parse_rfc3339(rec["started"]),
        "finished": parse_rfc3339(rec["finished"]),
    }
    if rec.get("attempt") is not None:
        data["attempt"] = _int(rec, "attempt", 1)
    if rec.get("node") is not None:
        data["node"] = _str(rec, "node")
    if data["finished"] < data["started"]:
        raise ValueError("checkpoint finished before it started")
    return data


def _str(rec: dict[str, Any], key: str) -> str:
    value = rec[key]
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key} must be a non-empty string")
    return value


def _int(rec: dict[str, Any], key: str, minimum: int) -> int:
    value = rec[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{key} must be an integer ≥ {minimum}, got {str(value)[:40]!r}")
    return value
