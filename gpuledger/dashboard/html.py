"""The finance dashboard: one self-contained HTML file (CSS inline, charts as inline SVG, no script
to run, no network). The data it was drawn from is embedded as
``<script type="application/json" id="data">`` so tools (and tests) can read the exact numbers.
"""

from __future__ import annotations

import json
from collections import defaultdict
from html import escape
from typing import Any

from gpuledger.dashboard.charts import grouped_bars, stacked_bars
from sql.idle_causes import IDLE_CAUSES

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#222;max-width:1360px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:16px;margin:24px 0 8px} .sub{color:#666;margin-bottom:16px}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(660px,1fr));gap:16px}
.card{border:1px solid #e3e3e3;border-radius:6px;padding:12px;background:#fff}
.kpis{display:flex;gap:16px;flex-wrap:wrap}.kpi{border:1px solid #e3e3e3;border-radius:6px;padding:10px 14px}
.kpi b{display:block;font-size:20px} table{border-collapse:collapse;font-size:13px;margin-bottom:12px}
td,th{border-bottom:1px solid #eee;padding:4px 10px;text-align:left} td.n,th.n{text-align:right}
tr.total td{font-weight:bold;border-top:2px solid #999} .bad{color:#c00;font-weight:bold}
"""
HOURS_COLS = ("allocated_gpu_hours", "busy_gpu_hours", "idle_gpu_hours", "failed_gpu_hours", "gpu_hours", "energy_kwh")


def _num(value: Any) -> str:
    return f"{value:,.2f}" if isinstance(value, float | int) and not isinstance(value, bool) else escape(str(value))


def table(rows: list[dict[str, Any]], columns: list[str], total: list[str] | None = None, table_id: str = "") -> str:
    """An HTML table; ``total`` columns are summed into a last row."""
    head = "".join(f'<th class="{"n" if total and c in total else ""}">{escape(c)}</th>' for c in columns)
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="{"n" if isinstance(row.get(c), float | int) else ""}">{_num(row.get(c, ""))}</td>'
            for c in columns
        )
        body.append(f"<tr>{cells}</tr>")
    if total:
        sums = "".join(
            f'<td class="n" data-col="{c}">{_num(sum(float(r[c] or 0) for r in rows))}</td>'
            if c in total
            else ("<td>total</td>" if i == 0 else "<td></td>")
            for i, c in enumerate(columns)
        )
        body.append(f'<tr class="total">{sums}</tr>')
    ident = f' id="{table_id}"' if table_id else ""
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _pivot(rows: list[dict[str, Any]], x: str, series: str, value: str) -> tuple[list[str], dict[str, list[float]]]:
    cats = sorted({str(r[x]) for r in rows})
    grid: dict[str, dict[str, float]] = defaultdict(dict)
    for r in rows:
        grid[str(r[series]) or "(none)"][str(r[x])] = grid[str(r[series]) or "(none)"].get(str(r[x]), 0.0) + float(
            r[value]
        )
    return cats, {name: [vals.get(c, 0.0) for c in cats] for name, vals in sorted(grid.items())}


def charts(data: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Chart id -> (title, svg)."""
    out: dict[str, tuple[str, str]] = {}
    cats, series = _pivot(data["daily_cost_by_business_unit"], "day", "business_unit", "cost")
    out["cost-by-bu"] = ("Daily cost by business unit", stacked_bars("cost", cats, series, "cost"))
    cats, series = _pivot(data["hourly_gpu_hours_by_business_unit"], "hour", "business_unit", "gpu_hours")
    cats = [c[11:16] if len(cats) <= 48 else c[5:13] for c in cats]
    out["hourly-bu"] = (
        "Allocated GPU-hours per hour by business unit",
        stacked_bars("hourly", cats, series, "GPU-hours"),
    )
    owned = [r for r in data["gpu_hours_by_business_unit"] if not str(r["key"]).startswith("__")]
    out["utilization"] = (
        "Allocated vs busy vs idle GPU-hours by business unit",
        grouped_bars(
            "utilization",
            [r["key"] for r in owned],
            {k: [float(r[f"{k}_gpu_hours"]) for r in owned] for k in ("allocated", "busy", "idle")},
            "GPU-hours",
        ),
    )
    causes = data.get("idle_causes_by_team", [])
    teams, by_cause = _pivot([r for r in causes if r["cause"] != "unobserved"], "key", "cause", "idle_gpu_hours")
    ordered = {c: by_cause[c] for c in IDLE_CAUSES if c in by_cause}
    out["idle-causes"] = (
        "Why allocated GPUs sat idle: idle GPU-hours by team and cause",
        stacked_bars("idle causes", teams, ordered, "GPU-hours"),
    )
    burn = data["failure_burn_by_reason"]
    out["failure-burn"] = (
        "Failure burn by reason",
        grouped_bars(
            "failures",
            [r["failure_reason"] for r in burn],
            {
                "failed": [r["failed_gpu_hours"] for r in burn],
                "lost after checkpoint": [r["lost_gpu_hours"] for r in burn],
            },
            "GPU-hours",
        ),
    )
    q = data["queue"]
    out["queue"] = (
        "Queue time per queue",
        grouped_bars(
            "queue",
            [f"{r['scheduler'][:5]}/{r['queue']}" for r in q],
            {
                "avg wait (min)": [float(r["avg_wait_s"]) / 60 for r in q],
                "p95 wait (min)": [float(r["p95_wait_s"]) / 60 for r in q],
            },
            "minutes",
        ),
    )
    uc = data["unit_cost"]
    terms = ("compute", "network", "storage", "support", "operations", "idle", "retries")
    # each term's share of the unit cost as it reads (per 1M tokens, per 1k outputs, per run)
    per_unit = {
        t: [float(r[t]) / float(r["total"]) * float(r["unit_cost_scaled"] or 0.0) if r["total"] else 0.0 for r in uc]
        for t in terms
    }
    per = " / ".join(sorted({str(r["unit_cost_per"]) for r in uc})) or "accepted unit"
    currency = next((str(r["currency"]) for r in uc), "")
    out["unit-cost"] = (
        f"Effective unit cost per month, by term ({currency} per {per})",
        stacked_bars("unit cost", [str(r["month"])[:7] for r in uc], per_unit, f"{currency} per {per}"),
    )
    runs = sorted(data["benchmarks"], key=lambda r: str(r["time"]))
    health = {(str(r["day"]), r["node_set"]): r for r in data["fabric_health"]}
    rows = [(r, health.get((str(r["time"])[:10], ",".join(r["hosts"])), {})) for r in runs]
    out["fabric"] = (
        "Fabric health: NCCL average bus bandwidth per run (red: failed or below baseline)",
        grouped_bars(
            "fabric",
            [f"{str(r['time'])[5:10]} {','.join(r['hosts'])}" for r, _ in rows],
            {
                "avg busbw": [float(r["avg_busbw_gbps"] or 0) for r, _ in rows],
                "node set baseline": [float(h.get("baseline_gbps") or 0) for _, h in rows],
            },
            "GB/s",
            flagged=[not r["ok"] or bool(h.get("below_baseline")) for r, h in rows],
        ),
    )
    return out


def render(data: dict[str, Any], note: str = "") -> str:
    """The whole dashboard as one HTML document."""
    payload = json.dumps(data, sort_keys=True).replace("</", "<\\/")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>gpuledger — {escape(data["cluster"])}</title>
<style>{CSS}</style></head><body>
<h1>GPU cost and utilisation — cluster {escape(data["cluster"])}</h1>
<div class="sub">{escape(data["start"])} – {escape(data["end"])} (end exclusive, UTC). {escape(note)}</div>
{sections(data)}
<script type="application/json" id="data">{payload}</script>
</body></html>
"""


def sections(data: dict[str, Any]) -> str:
    """The dashboard's KPIs, charts and tables (the served dashboard shows them under its controls)."""
    t = data["totals"]
    currency = next((r["currency"] for r in data["daily_cost_by_business_unit"]), "")
    kpis = [
        ("total cost", f"{t['cost']:,.2f} {currency}"),
        ("capacity GPU-h", f"{t['capacity_gpu_hours']:,.1f}"),
        ("allocated GPU-h", f"{t['allocated_gpu_hours']:,.1f}"),
        ("busy GPU-h", f"{t['busy_gpu_hours']:,.1f}"),
        ("idle GPU-h", f"{t['idle_gpu_hours']:,.1f}"),
        ("failed GPU-h", f"{t['failed_gpu_hours']:,.1f}"),
        ("energy kWh", f"{t['energy_kwh']:,.1f}"),
    ]
    cards = "".join(
        f'<div class="card chart" id="chart-{cid}"><h2>{escape(title)}</h2>{svg}</div>'
        for cid, (title, svg) in charts(data).items()
    )
    cols = ["key", *HOURS_COLS]
    return f"""<div class="kpis">{
        "".join(f'<div class="kpi">{escape(k)}<b>{escape(v)}</b></div>' for k, v in kpis)
    }</div>
<div class="grid">{cards}</div>
<h2>GPU-hours by business unit (= <code>gpuledger report gpu-hours --by business_unit</code>)</h2>
{table(data["gpu_hours_by_business_unit"], cols, list(HOURS_COLS), "table-gpu-hours-bu")}
<h2>GPU-hours by team</h2>
{table(data["gpu_hours_by_team"], cols, list(HOURS_COLS), "table-gpu-hours-team")}
<h2>Idle GPU-hours by cause (= <code>gpuledger report idle-causes</code>; unobserved is not idle)</h2>
{
        table(
            data.get("idle_causes", []),
            ["cause", "idle_gpu_hours", "cost"],
            ["idle_gpu_hours", "cost"],
            "table-idle-causes",
        )
    }
<h2>Cost per million tokens by model (= <code>gpuledger report unit-cost --unit tokens --by model</code>)</h2>
{
        table(
            data.get("token_cost_by_model", []),
            ["key", "units", "cost", "cost_per_million_units", "successful_runs", "cost_per_successful_run"],
            ["units", "cost"],
            "table-token-cost",
        )
    }
<h2>Cost by day and business unit</h2>
{table(data["daily_cost_by_business_unit"], ["day", "business_unit", "cost", "currency"], ["cost"], "table-cost")}
<h2>Failure burn by reason</h2>
{
        table(
            data["failure_burn_by_reason"],
            ["failure_reason", "attempts", "failed_gpu_hours", "lost_gpu_hours"],
            ["failed_gpu_hours", "lost_gpu_hours"],
            "table-failures",
        )
    }
<h2>Queue time</h2>
{
        table(
            data["queue"],
            ["scheduler", "queue", "attempts", "avg_wait_s", "p95_wait_s", "waited_gpu_hours"],
            ["waited_gpu_hours"],
            "table-queue",
        )
    }
<h2>Fabric health per node set and day</h2>
{
        table(
            data["fabric_health"],
            ["day", "node_set", "runs", "failed_runs", "avg_busbw_gbps", "baseline_gbps", "ratio", "below_baseline"],
            None,
            "table-fabric",
        )
    }
<h2>Effective unit cost</h2>
{
        table(
            data["unit_cost"],
            [
                "month",
                "currency",
                "compute",
                "network",
                "storage",
                "support",
                "operations",
                "idle",
                "retries",
                "total",
                "accepted_units",
                "unit_kind",
                "unit_cost",
                "unit_cost_scaled",
                "unit_cost_per",
            ],
            None,
            "table-unit-cost",
        )
    }
"""
