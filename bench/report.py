"""Benchmark results as JSON, as a terminal table, and as docs/BENCHMARKS.md's results table."""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path
from typing import Any

# (key, label, unit, target text, predicate on the results or None)
ROWS: list[tuple[str, str, str, str, Any]] = [
    (
        "pipeline_samples_per_s",
        "pipeline: topic → facts queryable",
        "GPU-samples/s",
        "≥ 100,000",
        lambda r: r["pipeline_samples_per_s"] >= 100_000,
    ),
    ("bare_consume_samples_per_s", "bare aiokafka consume of gpu.metrics", "GPU-samples/s", "(baseline)", None),
    ("pipeline_vs_bare_pct", "pipeline / bare consume", "%", "≥ 50 %", lambda r: r["pipeline_vs_bare_pct"] >= 50),
    ("publish_samples_per_s", "publish (librdkafka, pre-encoded)", "GPU-samples/s", "—", None),
    ("freshness_rate_achieved", "paced load achieved", "GPU-samples/s", "10,000 (full run)", None),
    ("freshness_p50_s", "freshness p50 (ack → queryable in gpu_samples)", "s", "—", None),
    ("freshness_p99_s", "freshness p99", "s", "≤ 5", lambda r: r["freshness_p99_s"] <= 5),
    (
        "replay_samples_per_s",
        "replay from offset 0 (incl. worker start)",
        "GPU-samples/s",
        "≥ 100,000",
        lambda r: r["replay_samples_per_s"] >= 100_000,
    ),
    ("rss_1h_mib", "worker RSS after 1 h of history", "MiB", "—", None),
    ("rss_24h_mib", "worker RSS after 24 h of history", "MiB", "—", None),
    ("rss_growth_pct", "RSS growth 1 h → 24 h", "%", "≤ 20 %", lambda r: r["rss_growth_pct"] <= 20),
    ("monthly_query_s", "monthly gpu-hours by team (warm median)", "s", "≤ 1", lambda r: r["monthly_query_s"] <= 1),
    ("monthly_query_cold_s", "monthly gpu-hours by team (first run)", "s", "—", None),
    (
        "live_cpu_us_per_sample",
        "worker CPU per GPU-sample, live",
        "µs",
        "≤ 1.5 × backlog",
        lambda r: r["live_cpu_us_per_sample"] <= 1.5 * r["backlog_cpu_us_per_sample"],
    ),
    ("backlog_cpu_us_per_sample", "worker CPU per GPU-sample, backlog", "µs", "—", None),
    (
        "live_endpoint_cpu_us_per_sample",
        "ClickHouse endpoint CPU per GPU-sample, live",
        "µs",
        "≤ 2 × backlog",
        lambda r: r["live_endpoint_cpu_us_per_sample"] <= 2 * r["backlog_endpoint_cpu_us_per_sample"],
    ),
    ("backlog_endpoint_cpu_us_per_sample", "ClickHouse endpoint CPU per GPU-sample, backlog", "µs", "—", None),
    ("idle_worker_cpu_pct", "worker CPU with no new data (share of a core)", "%", "—", None),
    ("live_idle_cpu_us_per_sample", "… of it per live GPU-sample", "µs", "—", None),
    ("idle_endpoint_cpu_pct", "ClickHouse endpoint CPU with no new data (share of a core)", "%", "—", None),
    ("live_idle_endpoint_cpu_us_per_sample", "… of it per live GPU-sample", "µs", "—", None),
]
# per-source rows of ``parse_publish_samples_per_s``: source → target (value → met) or None
SOURCE_TARGETS: dict[str, tuple[str, Any]] = {"dcgm_query_range": ("≥ 300,000", lambda v: v >= 300_000)}
RECORD_SOURCES = frozenset({"kubernetes_pods"})  # rated in records/s: their records are not GPU-samples


def table_rows(results: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    out = []
    for key, label, unit, target, ok in ROWS:
        if key not in results:
            continue
        verdict = "" if ok is None else ("met" if ok(results) else "not met")
        out.append((label, f"{_shown(results[key])} {unit}", target, verdict))
    for source, rate in results.get("parse_publish_samples_per_s", {}).items():
        target, met = SOURCE_TARGETS.get(source, ("—", None))
        verdict = "" if met is None else ("met" if met(rate) else "not met")
        unit = "records/s" if source in RECORD_SOURCES else "GPU-samples/s"
        out.append((f"collector parse + publish: {source}", f"{_shown(rate)} {unit}", target, verdict))
    return out


def _shown(value: Any) -> str:
    return f"{value:,.1f}" if isinstance(value, float) and value >= 100 else f"{value}"


def markdown_table(results: dict[str, Any]) -> str:
    lines = ["| measurement | result | target | |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in table_rows(results)]
    return "\n".join(lines)


def machine() -> str:
    """CPU model and count from /proc/cpuinfo, memory from `free -m`, the Python version."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        cpuinfo = ""
    models = [line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")]
    try:
        free = subprocess.run(["free", "-m"], capture_output=True, text=True, check=False).stdout.rstrip()  # noqa: S607
    except OSError:
        free = "(free not available)"
    cpu = f"{len(models)} × {models[0]}" if models else "unknown CPU"
    return f"- CPU: {cpu}\n- Python {platform.python_version()} on {platform.platform()}\n\n```\n$ free -m\n{free}\n```"
