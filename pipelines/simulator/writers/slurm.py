"""``slurm/sacct.json`` (``sacct -D --json``, data_parser v0.0.41) and ``slurm/squeue.json``
(``squeue --json``, data_parser v0.0.39) as of the end of the window.

sacct: one record per attempt (``restart_cnt`` = attempt - 1; a requeued job's earlier runs end
``PREEMPTED`` or ``NODE_FAIL``), plus a ``PENDING`` record for jobs waiting (never started, or
requeued and not yet restarted). Times are plain epoch integers (``0`` = not yet), the limit a
``{set, infinite, number}`` object; ``state.current`` a list; ``exit_code`` with a status list and
``return_code``/``signal`` objects; TRES lists hold the plain ``gpu`` and the typed ``gpu:<type>``
entries for the same GPUs; ``gres_detail`` one ``gpu:<type>:<n>(IDX:…)`` per node in ``nodes``
(a compressed hostlist); ``comment.job`` carries ``model=<name>`` or ``wckey.wckey`` the model.
squeue: the running and pending jobs, with ``job_state`` a string and ``tres_alloc_str``.

Malformed records (fake jobs): in sacct one with a garbage start time and one without
``job_id``; in squeue one with a numeric ``job_state``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from pipelines.simulator.config import SimConfig
from pipelines.simulator.failures import SLURM_STATE
from pipelines.simulator.model.jobs import Attempt, JobSpec
from pipelines.simulator.writers.common import compress_hostlist, write_text
from pipelines.simulator.writers.slurm_fields import exit_code, gres_detail, no_val, tres_list, tres_string

SACCT_FILE, SQUEUE_FILE = "slurm/sacct.json", "slurm/squeue.json"
SACCT_MALFORMED, SQUEUE_MALFORMED = 2, 1


def _model_fields(spec: JobSpec) -> tuple[str, str]:
    comment = f"model={spec.model}" if spec.model_via == "comment" else ""
    wckey = spec.model or "" if spec.model_via == "wckey" else ""
    return comment, wckey


def _record(cfg: SimConfig, spec: JobSpec, attempt: Attempt | None, restart: int, pending_since: int) -> dict[str, Any]:
    epoch = cfg.start_epoch
    comment, wckey = _model_fields(spec)
    nodes = attempt.nodes if attempt else []
    finished = attempt.end if attempt is not None else None
    reason = attempt.reason if attempt is not None else None
    ended = finished is not None
    state = SLURM_STATE[reason] if ended else ("RUNNING" if attempt else "PENDING")
    start = epoch + attempt.start if attempt else 0
    end = epoch + finished if finished is not None else 0
    submit = epoch + (attempt.submit if attempt else pending_since)
    eligible = epoch + (attempt.eligible if attempt and attempt.eligible is not None else pending_since)
    elapsed = (end or epoch + cfg.horizon) - start if attempt else 0
    cpus = 16 * spec.count * spec.nodes
    rec: dict[str, Any] = {
        "account": spec.account,
        "comment": {"administrator": "", "job": comment, "system": ""},
        "allocation_nodes": len(nodes),
        "association": {
            "account": spec.account,
            "cluster": cfg.cluster,
            "partition": "",
            "user": spec.user,
            "id": 10 + spec.seq % 50,
        },
        "cluster": cfg.cluster,
        "derived_exit_code": exit_code(None, ended),
        "exit_code": exit_code(reason, ended),
        "failed_node": nodes[0] if reason == "node_failure" else "",
        "flags": ["CLEAR_SCHEDULING", "STARTED_ON_SCHEDULE"] if attempt else [],
        "group": spec.account,
        "job_id": spec.slurm_id,
        "name": spec.name,
        "nodes": compress_hostlist(nodes) or "None assigned",
        "partition": spec.partition,
        "hold": False,
        "priority": no_val(4294901000 - spec.seq),
        "qos": "normal",
        "restart_cnt": restart,
        "reservation": {"id": 0, "name": "acceptance" if spec.reservation else ""},
        "state": {"current": [state], "reason": "None" if attempt else ("BeginTime" if restart else "Resources")},
        "steps": [],
        "time": {
            "elapsed": elapsed,
            "eligible": eligible,
            "end": end,
            "planned": no_val(max(start - eligible, 0) if attempt else 0),
            "start": start,
            "submission": submit,
            "suspended": 0,
            "system": {"seconds": 0, "microseconds": 0},
            "limit": no_val(spec.time_limit_min or 0),
            "total": {"seconds": 0, "microseconds": 0},
            "user": {"seconds": 0, "microseconds": 0},
        },
        "tres": {
            "allocated": tres_list(attempt, cpus) if attempt else [],
            "requested": tres_list(None, cpus, spec=spec),
        },
        "user": spec.user,
        "wckey": {"wckey": wckey, "flags": ["ASSIGNED_DEFAULT"] if not wckey else []},
        "working_directory": f"/home/{spec.user}/{spec.name}",
    }
    if attempt:
        rec["gres_detail"] = gres_detail(attempt)
    return rec


def _sacct_records(cfg: SimConfig, specs: list[JobSpec]) -> tuple[list[dict[str, Any]], list[tuple[JobSpec, int]]]:
    """All sacct records, and the jobs pending at the end with their restart count."""
    records, pending = [], []
    for spec in specs:
        if spec.scheduler != "slurm" or spec.dropped:
            continue
        for attempt in spec.attempts:
            records.append(_record(cfg, spec, attempt, attempt.number - 1, attempt.submit))
        last = spec.attempts[-1] if spec.attempts else None
        if last is None or (
            last.end is not None and last.reason in ("preempted", "node_failure") and spec.kind != "benchmark"
        ):
            since = spec.submit if last is None else last.end
            records.append(_record(cfg, spec, None, len(spec.attempts), since))  # type: ignore[arg-type]
            pending.append((spec, len(spec.attempts)))
    records.sort(key=lambda r: (r["job_id"], r["restart_cnt"]))
    return records, pending


def _malformed_sacct(cfg: SimConfig, template: dict[str, Any]) -> list[dict[str, Any]]:
    garbage = orjson.loads(orjson.dumps(template))
    garbage.update(job_id=99998, name="broken-accounting")
    garbage["time"]["start"] = "yesterday"
    missing = orjson.loads(orjson.dumps(template))
    del missing["job_id"]
    missing["name"] = "orphan-record"
    return [garbage, missing]


def write_sacct(path: Path, cfg: SimConfig, specs: list[JobSpec]) -> tuple[int, list[tuple[JobSpec, int]]]:
    records, pending = _sacct_records(cfg, specs)
    done = (
        next(r for r in records if r["state"]["current"] == ["COMPLETED"])
        if any(r["state"]["current"] == ["COMPLETED"] for r in records)
        else records[0]
    )
    bad = _malformed_sacct(cfg, done)
    records[len(records) // 3 : len(records) // 3] = bad[:1]
    records[2 * len(records) // 3 : 2 * len(records) // 3] = bad[1:]
    doc = {
        "meta": {
            "plugin": {
                "type": "",
                "name": "",
                "data_parser": "data_parser/v0.0.41",
                "accounting_storage": "accounting_storage/slurmdbd",
            },
            "client": {"source": "/dev/pts/2", "user": "root", "group": "root"},
            "command": ["sacct", "--duplicates", "--allusers", "--json"],
            "slurm": {
                "version": {"major": "24", "micro": "5", "minor": "05"},
                "release": "24.05.5",
                "cluster": cfg.cluster,
            },
        },
        "jobs": records,
        "warnings": [],
        "errors": [],
    }
    write_text(path, orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
    return SACCT_MALFORMED, pending


def _squeue_job(cfg: SimConfig, spec: JobSpec, attempt: Attempt | None, restart: int) -> dict[str, Any]:
    epoch = cfg.start_epoch
    comment, wckey = _model_fields(spec)
    limit = (spec.time_limit_min or 0) * 60
    start = epoch + attempt.start if attempt else 0
    waiting_since = spec.attempts[-1].end if spec.attempts and spec.attempts[-1].end is not None else spec.submit
    submit = epoch + (attempt.submit if attempt else waiting_since)
    job: dict[str, Any] = {
        "account": spec.account,
        "accrue_time": submit,
        "admin_comment": "",
        "batch_flag": True,
        "batch_host": attempt.nodes[0] if attempt else "",
        "cluster": cfg.cluster,
        "command": f"/home/{spec.user}/{spec.name}/run.sh",
        "comment": comment,
        "current_working_directory": f"/home/{spec.user}/{spec.name}",
        "eligible_time": submit,
        "end_time": start + limit if attempt else 0,
        "exit_code": no_val(0),
        "group_name": spec.account,
        "job_id": spec.slurm_id,
        "job_state": "RUNNING" if attempt else "PENDING",
        "name": spec.name,
        "nodes": compress_hostlist(attempt.nodes) if attempt else "",
        "node_count": no_val(spec.nodes),
        "partition": spec.partition,
        "priority": no_val(4294901000 - spec.seq),
        "qos": "normal",
        "requeue": True,
        "restart_cnt": restart,
        "start_time": start,
        "state_reason": "None" if attempt else "Resources",
        "submit_time": submit,
        "time_limit": no_val(spec.time_limit_min or 0),
        "tres_alloc_str": tres_string(attempt, 16 * spec.count * spec.nodes) if attempt else "",
        "tres_req_str": tres_string(None, 16 * spec.count * spec.nodes, spec=spec),
        "user_name": spec.user,
        "wckey": wckey,
    }
    if attempt:
        job["gres_detail"] = gres_detail(attempt)
    return job


def write_squeue(path: Path, cfg: SimConfig, specs: list[JobSpec], pending: list[tuple[JobSpec, int]]) -> int:
    jobs = [
        _squeue_job(cfg, a.spec, a, a.number - 1)
        for s in specs
        if s.scheduler == "slurm"
        for a in s.attempts
        if a.end is None
    ]
    jobs += [_squeue_job(cfg, spec, None, restart) for spec, restart in pending]
    jobs.sort(key=lambda j: j["job_id"])
    template = next(s for s in specs if s.scheduler == "slurm")
    bad = _squeue_job(cfg, template, None, 0)
    bad.update(job_id=99999, name="state-garbage", job_state=42)
    jobs.insert(len(jobs) // 2, bad)
    doc = {
        "meta": {
            "plugin": {"type": "openapi/v0.0.39", "name": "Slurm OpenAPI v0.0.39", "data_parser": "v0.0.39"},
            "Slurm": {"version": {"major": 23, "micro": 5, "minor": 2}, "release": "23.02.5"},
        },
        "errors": [],
        "warnings": [],
        "jobs": jobs,
        "last_backfill": cfg.start_epoch + cfg.horizon - 17,
        "last_update": cfg.start_epoch + cfg.horizon - 1,
    }
    write_text(path, orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
    return SQUEUE_MALFORMED
