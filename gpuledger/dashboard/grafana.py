"""The Grafana dashboard (``infra/grafana/gpuledger.json``) for the grafana-clickhouse-datasource
plugin, built from the same SQL as ``gpuledger report`` and the HTML dashboard.

Server-side parameters become Grafana macros and variables: ``{start:…}`` → ``$__fromTime``,
``{end:…}`` → ``$__toTime``, ``{by:String}`` → ``'business_unit'`` or ``'team'``, ``{limit:UInt32}``
→ ``50``, and ``{cluster:String}`` → :data:`CLUSTER`, the ``cluster`` query variable (one cluster,
or All = ``*``) as ClickHouse decodes it from its percent-encoded form.

Why percent-encoding and not ``${cluster:sqlstring}``: Grafana's ``sqlstring`` doubles ``'`` but
leaves ``\\`` alone, and ClickHouse reads ``\\'`` inside a literal as an escaped quote, so the value
``\\' OR 1=1 --`` would end the literal and rewrite the query (``tests/integration/
test_grafana_sql.py`` shows it does). ``${cluster:percentencode}`` leaves only ``A-Z a-z 0-9 - _ .
~ %`` in the text, which cannot end a quoted literal; ``decodeURLComponent`` gives the value back.
A viewer can set any value through the URL (``?var-cluster=…``), so this holds for every value,
not just the ones the variable's query lists. Grafana should also connect as the read-only account
(``CLICKHOUSE_READER_USER``, see ``sql/access/reader.sql``).

    python -m gpuledger.dashboard.grafana > infra/grafana/gpuledger.json

Panels use the ``datasource`` variable, so the dashboard imports into an existing Grafana.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from gpuledger.dashboard.data import DAILY_COST, FABRIC, HOURLY_BU, UNIT_COST
from pipelines.clusters import ALL_CLUSTERS
from sql import load_query

PLUGIN = "grafana-clickhouse-datasource"
DATASOURCE = {"type": PLUGIN, "uid": "${datasource}"}
_SELECTED = "decodeURLComponent('${cluster:percentencode}')"
CLUSTER = f"if({_SELECTED} = '{ALL_CLUSTERS}', '', {_SELECTED})"  # '' = every cluster: ClusterScope.sql_value
CLUSTERS_QUERY = "SELECT DISTINCT cluster FROM node_activity_summary ORDER BY cluster"
PARAMS = [
    (re.compile(r"\{start:DateTime64\(3, 'UTC'\)\}"), "$__fromTime"),
    (re.compile(r"\{end:DateTime64\(3, 'UTC'\)\}"), "$__toTime"),
    (re.compile(r"\{limit:UInt32\}"), "50"),
]
_ANY_CLUSTER = "({cluster:String} = '' OR cluster = {cluster:String})"
# (title, sql, {by}, panel type, width)
PANELS: list[tuple[str, str, str, str, int]] = [
    ("Allocated GPU-hours per hour by business unit", HOURLY_BU, "", "timeseries", 24),
    ("Daily cost by business unit", DAILY_COST, "", "barchart", 12),
    (
        "GPU-hours by business unit (allocated / busy / idle / failed)",
        load_query("gpu_hours"),
        "business_unit",
        "table",
        12,
    ),
    ("GPU-hours by team", load_query("gpu_hours"), "team", "table", 12),
    ("Idle capacity by business unit", load_query("idle"), "business_unit", "table", 12),
    ("Failure burn (failed attempts)", load_query("failures"), "", "table", 24),
    ("Queue time", load_query("queue"), "", "table", 12),
    ("Fabric health (NCCL bus bandwidth vs baseline)", FABRIC, "", "table", 12),
    ("NCCL acceptance runs", load_query("benchmarks"), "", "table", 12),
    ("Effective cluster unit cost", UNIT_COST, "", "table", 12),
]


def _literal(text: str) -> str:
    """``text`` as a ``re.sub`` replacement that inserts it verbatim."""
    return text.replace("\\", "\\\\")


def grafana_sql(sql: str, by: str = "") -> str:
    """A named query with its parameters replaced by Grafana macros and variables (comments dropped)."""
    text = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--")).strip()
    for pattern, macro in PARAMS:
        text = pattern.sub(_literal(macro), text)
    text = text.replace("{by:String}", f"'{by}'")
    text = text.replace(_ANY_CLUSTER, "\0").replace("cluster = {cluster:String}", "\0")
    text = text.replace("\0", _ANY_CLUSTER).replace("{cluster:String}", CLUSTER)
    if "{" in text.replace("${cluster:percentencode}", ""):
        raise ValueError(f"a parameter has no Grafana equivalent in: {text[:80]}")
    return text


def panel(index: int, title: str, sql: str, by: str, kind: str, width: int, y: int, x: int) -> dict[str, Any]:
    return {
        "id": index + 1,
        "title": title,
        "type": kind,
        "datasource": DATASOURCE,
        "gridPos": {"h": 9, "w": width, "x": x, "y": y},
        "targets": [
            {
                "refId": "A",
                "datasource": DATASOURCE,
                "editorType": "sql",
                "queryType": "timeseries" if kind == "timeseries" else "table",
                "format": 0 if kind == "timeseries" else 1,
                "rawSql": grafana_sql(sql, by),
            }
        ],
        "options": {},
        "fieldConfig": {"defaults": {}, "overrides": []},
    }


def dashboard() -> dict[str, Any]:
    panels, x, y = [], 0, 0
    for i, (title, sql, by, kind, width) in enumerate(PANELS):
        if x + width > 24:
            x, y = 0, y + 9
        panels.append(panel(i, title, sql, by, kind, width, y, x))
        x += width
    return {
        "title": "gpuledger — GPU cost and utilisation",
        "uid": "gpuledger",
        "schemaVersion": 39,
        "time": {"from": "now-30d", "to": "now"},
        "timezone": "utc",
        "editable": True,
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "ClickHouse",
                    "type": "datasource",
                    "query": PLUGIN,
                    "current": {},
                    "hide": 0,
                },
                {
                    "name": "cluster",
                    "label": "cluster",
                    "type": "query",
                    "datasource": DATASOURCE,
                    "query": CLUSTERS_QUERY,
                    "definition": CLUSTERS_QUERY,
                    "refresh": 1,
                    "sort": 1,
                    "includeAll": True,
                    "allValue": ALL_CLUSTERS,
                    "multi": False,
                    "current": {"text": "All", "value": "$__all"},
                },
            ]
        },
        "panels": panels,
    }


if __name__ == "__main__":
    sys.stdout.write(json.dumps(dashboard(), indent=2) + "\n")
