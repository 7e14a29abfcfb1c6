"""Value shapes of Slurm's JSON output used by the sacct/squeue writers."""

from __future__ import annotations

from typing import Any

from pipelines.simulator.config import GPU_MODELS
from pipelines.simulator.model.jobs import Attempt, JobSpec

TRES_IDS = {
    "cpu": 1,
    "mem": 2,
    "node": 4,
    "billing": 5,
    "gres/gpu": 1001,
    "gres/gpu:a100": 1002,
    "gres/gpu:h100": 1003,
    "gres/gpu:h200": 1004,
}
EXIT = {
    None: (0, None),
    "app_error": (1, None),
    "oom": (0, 9),
    "timeout": (0, 15),
    "cancelled": (0, 15),
    "preempted": (0, 15),
    "node_failure": (0, 9),
}
SIGNAL_NAMES = {9: "KILL", 15: "TERM"}
MEM_PER_CPU_MB = 8000


def no_val(number: int, infinite: bool = False) -> dict[str, Any]:
    return {"set": True, "infinite": infinite, "number": number}


def exit_code(reason: str | None, ended: bool) -> dict[str, Any]:
    code, signal = EXIT[reason] if ended else (0, None)
    status = ["SUCCESS"] if code == 0 and signal is None else (["SIGNALED"] if signal else ["FAILED"])
    return {
        "status": status,
        "return_code": no_val(code),
        "signal": {
            "id": {"set": signal is not None, "infinite": False, "number": signal or 0},
            "name": SIGNAL_NAMES.get(signal or 0, ""),
        },
    }


def _ranges(indices: list[int]) -> str:
    out, run = [], [indices[0]]
    for i in [*indices[1:], -1]:  # -1: a sentinel that closes the last run
        if i == run[-1] + 1:
            run.append(i)
            continue
        out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
        run = [i]
    return ",".join(out)


def _per_node(attempt: Attempt) -> list[tuple[str, str, list[int]]]:
    """(node, gres type, GPU indices) in hostlist (sorted name) order."""
    by: dict[str, tuple[str, list[int]]] = {}
    for slot in attempt.slots:
        by.setdefault(slot.gpu.node, (slot.gpu.gres, []))[1].append(slot.gpu.index)
    return [(node, gres, sorted(idx)) for node, (gres, idx) in sorted(by.items())]


def gres_detail(attempt: Attempt) -> list[str]:
    return [f"gpu:{gres}:{len(idx)}(IDX:{_ranges(idx)})" for _, gres, idx in _per_node(attempt)]


def _gpu_counts(attempt: Attempt | None, spec: JobSpec | None) -> tuple[int, dict[str, int]]:
    if attempt is None:
        assert spec is not None
        total = spec.count * spec.nodes
        return total, ({GPU_MODELS[spec.gpu_type].gres: total} if spec.gpu_type else {})
    typed: dict[str, int] = {}
    for slot in attempt.slots:
        typed[slot.gpu.gres] = typed.get(slot.gpu.gres, 0) + 1
    return len(attempt.slots), typed


def tres_list(attempt: Attempt | None, cpus: int, spec: JobSpec | None = None) -> list[dict[str, Any]]:
    nodes = len(attempt.nodes) if attempt else (spec.nodes if spec else 1)
    total, typed = _gpu_counts(attempt, spec)
    entries = [
        ("cpu", "", cpus),
        ("mem", "", cpus * MEM_PER_CPU_MB),
        ("node", "", nodes),
        ("billing", "", cpus),
        ("gres", "gpu", total),
    ] + [("gres", f"gpu:{t}", n) for t, n in sorted(typed.items())]
    return [
        {"type": kind, "name": name, "id": TRES_IDS[f"{kind}/{name}" if name else kind], "count": count}
        for kind, name, count in entries
    ]


def tres_string(attempt: Attempt | None, cpus: int, spec: JobSpec | None = None) -> str:
    nodes = len(attempt.nodes) if attempt else (spec.nodes if spec else 1)
    total, typed = _gpu_counts(attempt, spec)
    parts = [f"cpu={cpus}", f"mem={cpus * MEM_PER_CPU_MB}M", f"node={nodes}", f"billing={cpus}", f"gres/gpu={total}"]
    parts += [f"gres/gpu:{t}={n}" for t, n in sorted(typed.items())]
    return ",".join(parts)
