"""Workload outputs → ``workload.output`` events (topic ``storage.io``): the units of work a job
produced, the denominator of the cost of a unit (docs/ATTRIBUTION.md "Outputs").

Two formats (``gpuledger ingest outputs --file F``; the parser tells them apart):

**JSON lines**, the contract a training or serving job (or its platform) emits, one object per
line, UTF-8, blank lines ignored::

    {"job_id": "llm-serve/vllm-0", "unit": "tokens_generated", "quantity": 1843200,
     "start": "2026-11-02T10:00:00Z", "end": "2026-11-02T11:00:00Z", "model_name": "llama-3-8b"}

==============  =========  ===================================================================
key             required   meaning
==============  =========  ===================================================================
``job_id``      yes        the job as its scheduler names it: Slurm ``1234``/``1234_7``,
                           Kubernetes ``<namespace>/<pod>``; a JSON integer is read as text
``scheduler``   no         ``kubernetes`` or ``slurm``; default: ``kubernetes`` when ``job_id``
                           has a ``/``, else ``slurm``
``unit``        yes        what was produced, lower-case ``[a-z][a-z0-9_]*``: ``tokens_generated``,
                           ``tokens_prompt``, ``samples``, ``images``, ``requests``, …
``quantity``    yes        how many, a number ≥ 0
``start``       yes        RFC 3339; the interval the quantity was produced in
``end``         yes        RFC 3339, not before ``start``
``model_name``  no         what the server calls its model (shown, not used to attribute)
``cluster``     no         overrides the ``cluster`` the parser was given, for that line
==============  =========  ===================================================================

The id is ``event_id("output", cluster, scheduler, job_id, unit, start, end)``: the same record
sent twice counts once.

**A Prometheus query_range answer** (matrix) of output counters, as ``GET /api/v1/query_range``
returns it for e.g. ``{__name__=~"vllm:generation_tokens_total|vllm:prompt_tokens_total"}``.
Counters and their units: vLLM's ``vllm:generation_tokens_total`` → ``tokens_generated`` and
``vllm:prompt_tokens_total`` → ``tokens_prompt``, or the ``metrics`` hint (``{"name": "unit"}``)
for any other counter. The owner comes from the series' labels: ``namespace`` and ``pod`` (or
their ``exported_`` forms) → the Kubernetes pod, else ``hpc_job`` / ``slurm_job_id`` → the Slurm
job; a series naming neither is a dead letter. A series' increase between consecutive points
(a drop is a counter reset: the new value is the increase since it) belongs to the UTC hour of
the later point; each series gives one event per hour, ``[hour, hour + 1 h)``, with id
``event_id("output", cluster, scheduler, job_id, unit, hour, series labels)``, so a later read of
a partial hour replaces the earlier one in the warehouse. What a counter counted before its first
point in the answer is not seen: read from before the job started.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

import orjson

from pipelines.events import event_id
from pipelines.parsers import prom
from pipelines.parsers.base import NotThisFormat, ParseResult, json_lines
from pipelines.times import HOUR, floor_hour, parse_rfc3339
from pipelines.topics import STORAGE_IO

SOURCE = "outputs"
TOPIC = STORAGE_IO.name
COUNTERS = {"vllm:generation_tokens_total": "tokens_generated", "vllm:prompt_tokens_total": "tokens_prompt"}


def parse(
    data: bytes | str, *, cluster: str, origin: str | None = None, metrics: dict[str, str] | None = None, **hints: Any
) -> ParseResult:
    """Parse output records (JSON lines) or a Prometheus answer of output counters."""
    text = prom.as_text(data)
    stripped = text.lstrip()
    if stripped.startswith("{") and '"resultType"' in text[:4096]:
        return _parse_prometheus(text, cluster, origin, {**COUNTERS, **(metrics or {})})
    if not any(line.lstrip().startswith("{") and '"unit"' in line for line in text.split("\n")):
        raise NotThisFormat("neither JSON lines with a unit nor a Prometheus query_range answer")
    return json_lines(
        text, lambda line, lineno: _record(line, lineno, cluster), topic=TOPIC, source=SOURCE, origin=origin
    )


def _event(cluster: str, data: dict[str, Any], *key: object) -> dict[str, Any]:
    return {
        "id": event_id("output", cluster, *key),
        "source": SOURCE,
        "type": "workload.output",
        "time": data["end"],
        "cluster": cluster,
        "data": data,
    }


def _record(line: str, lineno: int, cluster: str) -> tuple[dict[str, Any] | None, str]:
    try:
        rec = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        return None, f"line {lineno}: invalid JSON: {exc}"
    if not isinstance(rec, dict):
        return None, f"line {lineno}: not a JSON object"
    try:
        for key in ("job_id", "unit", "quantity", "start", "end"):
            if key not in rec:
                raise ValueError(f"missing {key!r}")
        job_id = (
            str(rec["job_id"])
            if isinstance(rec["job_id"], int) and not isinstance(rec["job_id"], bool)
            else rec["job_id"]
        )
        if not isinstance(job_id, str) or not job_id:
            raise ValueError("job_id must be a non-empty string")
        quantity = rec["quantity"]
        if isinstance(quantity, bool) or not isinstance(quantity, int | float):
            raise ValueError(f"quantity must be a number, got {str(quantity)[:40]!r}")
        data: dict[str, Any] = {
            "scheduler": rec.get("scheduler") or ("kubernetes" if "/" in job_id else "slurm"),
            "job_id": job_id,
            "unit": rec["unit"],
            "quantity": float(quantity),
            "start": parse_rfc3339(rec["start"]),
            "end": parse_rfc3339(rec["end"]),
        }
        if rec.get("model_name") is not None:
            data["model_name"] = rec["model_name"]
    except (ValueError, TypeError) as exc:
        return None, f"line {lineno}: {exc}"
    line_cluster = rec.get("cluster", cluster)
    if not isinstance(line_cluster, str) or not line_cluster:
        return None, f"line {lineno}: cluster must be a non-empty string"
    return _event(line_cluster, data, data["scheduler"], job_id, data["unit"], data["start"], data["end"]), ""


def _owner(labels: dict[str, str]) -> tuple[str, str] | None:
    namespace = labels.get("exported_namespace") or labels.get("namespace")
    pod = labels.get("exported_pod") or labels.get("pod")
    if namespace and pod:
        return "kubernetes", f"{namespace}/{pod}"
    job = labels.get("hpc_job") or labels.get("slurm_job_id")
    return ("slurm", job) if job else None


def _series_key(sample: prom.Sample) -> str:
    return sample.name + orjson.dumps(sample.labels, option=orjson.OPT_SORT_KEYS).decode()


def _parse_prometheus(text: str, cluster: str, origin: str | None, units: dict[str, str]) -> ParseResult:
    reading = prom.read_api_answer(text)
    result = ParseResult()
    for raw, reason in reading.bad:
        result.reject(topic=TOPIC, source=SOURCE, reason=reason, raw=raw, origin=origin)
    series: dict[str, list[prom.Sample]] = defaultdict(list)
    for sample in reading.samples:
        if sample.name in units:
            series[_series_key(sample)].append(sample)
    for key, samples in sorted(series.items()):
        first = samples[0]
        owner = _owner(first.labels)
        if owner is None:
            result.reject(
                topic=TOPIC,
                source=SOURCE,
                origin=origin,
                raw=first.raw,
                reason="an output series names no pod (namespace, pod) and no Slurm job (hpc_job)",
            )
            continue
        scheduler, job_id = owner
        hours: dict[datetime, float] = defaultdict(float)
        points = sorted((s.time, s.value) for s in samples if s.time is not None)
        for (_, before), (at, after) in zip(points, points[1:], strict=False):
            hours[floor_hour(at)] += after if after < before else after - before
        unit = units[first.name]
        for hour, quantity in sorted(hours.items()):
            data: dict[str, Any] = {
                "scheduler": scheduler,
                "job_id": job_id,
                "unit": unit,
                "quantity": quantity,
                "start": hour,
                "end": hour + HOUR,
            }
            if first.labels.get("model_name"):
                data["model_name"] = first.labels["model_name"]
            result.add(
                _event(cluster, data, scheduler, job_id, unit, hour, key),
                topic=TOPIC,
                source=SOURCE,
                raw=first.raw,
                origin=origin,
            )
    if not series and not reading.bad:
        raise NotThisFormat(f"the Prometheus answer has none of the output counters {sorted(units)}")
    return result
