"""The SRE failure report as Markdown: which failures burned the most GPU-hours, idle capacity and
its causes, queue time and fabric health — the same rows as
``gpuledger report failures|idle|idle-causes|queue|benchmarks``.
"""

from __future__ import annotations

from typing import Any


def _md_table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    def cell(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:,.2f}"
        if isinstance(value, list):
            return ",".join(map(str, value))
        return str(value).replace("|", "\\|")

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines) if rows else "_none_"


def render(data: dict[str, Any], top: int = 20) -> str:
    t = data["totals"]
    degraded = [r for r in data["fabric_health"] if r["below_baseline"]]
    parts = [
        f"# SRE failure report — cluster {data['cluster']}",
        f"Period {data['start']} – {data['end']} (UTC, end exclusive).",
        f"Failed attempts used **{t['failed_gpu_hours']:,.2f}** of {t['allocated_gpu_hours']:,.2f} allocated "
        f"GPU-hours; allocated-but-idle **{t['idle_gpu_hours']:,.2f}**, unallocated {t['unallocated_gpu_hours']:,.2f},"
        f" unavailable (failed or drained GPUs) {t['unavailable_gpu_hours']:,.2f}.",
        "## Failure burn by reason",
        _md_table(data["failure_burn_by_reason"], ["failure_reason", "attempts", "failed_gpu_hours", "lost_gpu_hours"]),
        f"## Top {top} failed attempts (`gpuledger report failures`)",
        _md_table(
            data["failures"][:top],
            [
                "failure_reason",
                "team",
                "model",
                "job",
                "attempt",
                "failed_gpu_hours",
                "lost_gpu_hours",
                "nodes",
                "scheduler_state",
            ],
        ),
        "## Idle capacity by business unit (`gpuledger report idle --by business_unit`)",
        _md_table(
            data["idle_by_business_unit"], ["key", "allocated_idle_gpu_hours", "allocated_gpu_hours", "idle_share"]
        ),
        "## Why allocated GPUs sat idle (`gpuledger report idle-causes`)",
        _md_table(data.get("idle_causes", []), ["cause", "idle_gpu_hours", "cost"]),
        "## Queue time (`gpuledger report queue`)",
        _md_table(
            data["queue"],
            ["scheduler", "queue", "attempts", "avg_wait_s", "p95_wait_s", "max_wait_s", "waited_gpu_hours"],
        ),
        "## Fabric health (NCCL acceptance runs)",
        f"{len(degraded)} node set(s) below baseline: "
        + (", ".join(f"{r['node_set']} on {r['day']}" for r in degraded) or "none"),
        _md_table(
            data["fabric_health"],
            ["day", "node_set", "runs", "failed_runs", "avg_busbw_gbps", "baseline_gbps", "ratio", "below_baseline"],
        ),
    ]
    return "\n\n".join(parts) + "\n"
