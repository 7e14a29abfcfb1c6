"""The finance dashboard, SRE report and Grafana JSON rendered from a small hand-written data set."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from typing import Any

import pytest

from gpuledger.dashboard import grafana, html, sre
from gpuledger.dashboard.data import burn_by_reason, causes_total, totals


def _hours(key: str, alloc: float, busy: float, failed: float, total: float | None = None) -> dict[str, Any]:
    return {
        "key": key,
        "allocated_gpu_hours": alloc,
        "busy_gpu_hours": busy,
        "failed_gpu_hours": failed,
        "unobserved_gpu_hours": 0.0,
        "idle_gpu_hours": alloc - busy,
        "gpu_hours": alloc if total is None else total,
        "energy_kwh": 0.4 * (alloc if total is None else total),
    }


def sample() -> dict[str, Any]:
    data: dict[str, Any] = {
        "cluster": "c<1>",
        "start": "2026-11-02T00:00:00Z",
        "end": "2026-11-03T00:00:00Z",
        "gpu_hours_by_business_unit": [
            _hours("research", 100.0, 60.0, 10.0),
            _hours("product", 50.0, 45.0, 0.0),
            {**_hours("__unallocated__", 0.0, 0.0, 0.0, 30.0)},
        ],
        "gpu_hours_by_team": [_hours("llm", 100.0, 60.0, 10.0), _hours("search", 50.0, 45.0, 0.0)],
        "failures": [
            {
                "failure_reason": "oom",
                "team": "llm",
                "model": "m",
                "job": "j1",
                "attempt": 1,
                "failed_gpu_hours": 6.0,
                "lost_gpu_hours": 2.0,
                "nodes": ["gpu001"],
                "scheduler_state": "OUT_OF_MEMORY",
                "ended": None,
            },
            {
                "failure_reason": "oom",
                "team": "llm",
                "model": "m",
                "job": "j2",
                "attempt": 1,
                "failed_gpu_hours": 1.0,
                "lost_gpu_hours": None,
                "nodes": [],
                "scheduler_state": "",
                "ended": None,
            },
            {
                "failure_reason": "node_failure",
                "team": "llm",
                "model": "m",
                "job": "j3",
                "attempt": 2,
                "failed_gpu_hours": 3.0,
                "lost_gpu_hours": 3.0,
                "nodes": [],
                "scheduler_state": "",
                "ended": None,
            },
        ],
        "queue": [
            {
                "scheduler": "slurm",
                "queue": "gpu",
                "attempts": 4,
                "avg_wait_s": 600.0,
                "p50_wait_s": 300.0,
                "p95_wait_s": 1800.0,
                "max_wait_s": 2000.0,
                "waited_gpu_hours": 5.5,
            }
        ],
        "idle_by_business_unit": [
            {
                "key": "research",
                "allocated_idle_gpu_hours": 40.0,
                "allocated_gpu_hours": 100.0,
                "unallocated_gpu_hours": 0.0,
                "unavailable_gpu_hours": 0.0,
                "idle_share": 0.4,
            }
        ],
        "idle_causes_by_team": [
            {"key": team, "cause": cause, "idle_gpu_hours": hours, "cost": hours * 2.0, "currency": "USD"}
            for team, cause, hours in (
                ("llm", "checkpoint", 4.0),
                ("llm", "storage_stall", 6.0),
                ("llm", "idle", 30.0),
                ("llm", "unobserved", 1.0),
                ("search", "startup", 2.0),
                ("search", "idle", 3.0),
                ("search", "teardown", 0.0),
            )
        ],
        "benchmarks": [
            {
                "run_id": f"r{i}",
                "time": f"2026-11-02T02:0{i}:00Z",
                "collective": "all_reduce",
                "hosts": hosts,
                "host_count": 2,
                "ranks": 16,
                "nccl_version": "2.21.5",
                "avg_busbw_gbps": bw,
                "max_busbw_gbps": bw,
                "wrong_total": 0,
                "out_of_bounds": 0,
                "ok": True,
            }
            for i, (hosts, bw) in enumerate([(["gpu009", "gpu010"], 180.0), (["gpu011", "gpu012"], 90.0)])
        ],
        "hourly_gpu_hours_by_business_unit": [
            {"hour": f"2026-11-02T{h:02d}:00:00Z", "business_unit": bu, "gpu_hours": v}
            for h in range(3)
            for bu, v in (("research", 4.0 + h), ("product", 2.0))
        ],
        "daily_cost_by_business_unit": [
            {"day": "2026-11-02", "business_unit": "research", "cost": 250.5, "currency": "USD"},
            {"day": "2026-11-02", "business_unit": "product", "cost": 120.25, "currency": "USD"},
        ],
        "fabric_health": [
            {
                "day": "2026-11-02",
                "node_set": "gpu009,gpu010",
                "runs": 1,
                "failed_runs": 0,
                "avg_busbw_gbps": 180.0,
                "baseline_gbps": 181.0,
                "ratio": 0.99,
                "below_baseline": False,
            },
            {
                "day": "2026-11-02",
                "node_set": "gpu011,gpu012",
                "runs": 1,
                "failed_runs": 0,
                "avg_busbw_gbps": 90.0,
                "baseline_gbps": 181.0,
                "ratio": 0.5,
                "below_baseline": True,
            },
        ],
        "unit_cost": [
            {
                "month": "2026-11-01",
                "currency": "USD",
                "compute": 300.0,
                "network": 20.0,
                "storage": 10.0,
                "support": 5.0,
                "operations": 5.0,
                "idle": 20.0,
                "retries": 10.5,
                "total": 370.5,
                "accepted_units": 7.0,
                "unit_kind": "successful_runs",
                "unit_cost": 52.93,
                "unit_cost_scaled": 52.93,
                "unit_cost_per": "successful run",
            }
        ],
    }
    data["totals"] = totals(data)
    data["failure_burn_by_reason"] = burn_by_reason(data["failures"])
    data["idle_causes"] = causes_total(data["idle_causes_by_team"])
    return data


class Charts(HTMLParser):
    """Chart containers (``div.chart``) and how many drawn marks each one's svg holds."""

    def __init__(self) -> None:
        super().__init__()
        self.marks: dict[str, int] = {}
        self.current: str | None = None
        self.data_json = ""
        self._in_data = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "div" and "chart" in (a.get("class") or "").split():
            self.current = a["id"] or ""
            self.marks[self.current] = 0
        elif tag == "rect" and self.current and "mark" in (a.get("class") or ""):
            self.marks[self.current] += 1
        self._in_data = tag == "script" and a.get("id") == "data"

    def handle_data(self, data: str) -> None:
        if self._in_data:
            self.data_json += data


def parse(doc: str) -> Charts:
    parser = Charts()
    parser.feed(doc)
    return parser


def test_every_chart_draws_and_embedded_data_round_trips() -> None:
    data = sample()
    doc = html.render(data, "a note")
    parsed = parse(doc)
    assert set(parsed.marks) == {
        f"chart-{c}"
        for c in (
            "cost-by-bu",
            "hourly-bu",
            "utilization",
            "failure-burn",
            "queue",
            "unit-cost",
            "fabric",
            "idle-causes",
        )
    }
    assert all(n > 0 for n in parsed.marks.values()), parsed.marks
    assert json.loads(parsed.data_json) == json.loads(json.dumps(data))
    assert "http://" not in doc.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in doc
    assert "c&lt;1&gt;" in doc and "<title>gpuledger — c<1>" not in doc


def test_totals_rows_reconcile_and_degraded_fabric_is_flagged() -> None:
    data = sample()
    doc = html.render(data)
    table = doc.split('id="table-gpu-hours-bu"')[1].split("</table>")[0]
    total = dict(re.findall(r'data-col="(\w+)">([\d,.]+)<', table))
    assert float(total["allocated_gpu_hours"].replace(",", "")) == 150.0
    assert float(total["gpu_hours"].replace(",", "")) == 180.0  # the unallocated row counts in capacity
    assert data["totals"]["capacity_gpu_hours"] == 180.0 and data["totals"]["unallocated_gpu_hours"] == 30.0
    assert data["totals"]["cost"] == pytest.approx(370.75)
    assert data["totals"]["energy_kwh"] == pytest.approx(0.4 * 180.0)  # every GPU's, held or not
    assert float(total["energy_kwh"].replace(",", "")) == pytest.approx(72.0)
    assert "energy kWh<b>72.0</b>" in doc
    assert len(re.findall(r'fill="#d00">[^<]* !</text>', doc)) == 1  # one degraded label
    assert doc.count('stroke="#d00"') == 2  # both bars of the degraded node set, no others


def test_failure_burn_groups_by_reason_with_missing_lost_work_as_zero() -> None:
    burn = burn_by_reason(sample()["failures"])
    assert [(b["failure_reason"], b["attempts"], b["failed_gpu_hours"], b["lost_gpu_hours"]) for b in burn] == [
        ("oom", 2, 7.0, 2.0),
        ("node_failure", 1, 3.0, 3.0),
    ]


def test_empty_period_still_renders_every_chart_with_a_note() -> None:
    data = sample()
    for key in (
        "gpu_hours_by_business_unit",
        "gpu_hours_by_team",
        "failures",
        "queue",
        "hourly_gpu_hours_by_business_unit",
        "daily_cost_by_business_unit",
        "benchmarks",
        "fabric_health",
        "unit_cost",
        "idle_causes_by_team",
        "idle_causes",
    ):
        data[key] = []
    data["totals"], data["failure_burn_by_reason"] = totals(data), []
    doc = html.render(data)
    assert doc.count("no data") == 8 and doc.count("<svg") == 8


def test_sre_report_lists_burns_and_degraded_node_sets() -> None:
    text = sre.render(sample())
    assert "| oom | 2 | 7.00 | 2.00 |" in text
    assert "1 node set(s) below baseline: gpu011,gpu012 on 2026-11-02" in text
    assert "OUT_OF_MEMORY" in text
    assert "| storage_stall | 6.00 | 12.00 |" in text and "| idle | 33.00 | 66.00 |" in text


def test_idle_causes_total_per_cause_in_order_and_drawn_stacked_per_team() -> None:
    data = sample()
    assert [(r["cause"], r["idle_gpu_hours"]) for r in data["idle_causes"]] == [
        ("checkpoint", 4.0),
        ("storage_stall", 6.0),
        ("startup", 2.0),
        ("idle", 33.0),
        ("unobserved", 1.0),
    ]
    doc = html.render(data)
    chart = doc.split('id="chart-idle-causes"')[1].split("</svg>")[0]
    assert chart.count('class="mark') == 5  # llm: checkpoint, storage_stall, idle; search: startup, idle
    table = doc.split('id="table-idle-causes"')[1].split("</table>")[0]
    assert re.search(r'data-col="idle_gpu_hours">46\.00<', table)  # the total row


@pytest.mark.parametrize("title", [p[0] for p in grafana.PANELS])
def test_grafana_panels_use_macros_not_parameters(title: str) -> None:
    board = grafana.dashboard()
    target = next(p for p in board["panels"] if p["title"] == title)["targets"][0]
    sql = target["rawSql"]
    assert "{" not in sql.replace("${cluster:percentencode}", "") and "--" not in sql
    assert ("$__fromTime" in sql) == ("UNIT_COST" not in title and "unit cost" not in title)
    assert f"({grafana.CLUSTER} = '' OR cluster = {grafana.CLUSTER})" in sql
    assert "'${cluster}'" not in sql and "sqlstring" not in sql
    assert target["datasource"] == {"type": "grafana-clickhouse-datasource", "uid": "${datasource}"}


def test_grafana_json_in_infra_is_current() -> None:
    from pathlib import Path

    stored = json.loads((Path(__file__).resolve().parents[2] / "infra/grafana/gpuledger.json").read_text())
    assert stored == grafana.dashboard()


def test_the_unit_cost_chart_and_table_read_per_million_tokens() -> None:
    data = sample()
    data["unit_cost"] = [
        {
            **data["unit_cost"][0],
            "accepted_units": 8.05e6,
            "unit_kind": "output_events:tokens_generated",
            "unit_cost": 0.000046,
            "unit_cost_scaled": 46.02,
            "unit_cost_per": "1M tokens_generated",
        }
    ]
    doc = html.render(data)
    chart = doc[doc.index('id="chart-unit-cost"') :]
    chart = chart[: chart.index("</svg>")]
    assert "per 1M tokens_generated" in chart
    ticks = re.findall(r'text-anchor="end" font-size="11">([^<]*)</text>', chart)
    assert len(set(ticks)) == len(ticks) >= 3 and 46.02 <= float(ticks[-1]) <= 2 * 46.02, ticks
    table = doc[doc.index('id="table-unit-cost"') :]
    assert "46.02" in table[: table.index("</table>")] and "1M tokens_generated" in table[: table.index("</table>")]
