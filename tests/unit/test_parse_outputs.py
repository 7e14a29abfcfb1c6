"""Workload outputs (docs/ATTRIBUTION.md "Outputs"): JSON-lines records and vLLM's token counters
from a Prometheus answer become ``workload.output`` events of the job that produced them."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest

from pipelines.parsers.base import NotThisFormat
from pipelines.parsers.outputs import parse
from streams.ingest.rows import rows_for

T0 = datetime(2026, 11, 2, 10, 0, tzinfo=UTC).timestamp()


def matrix(*series: tuple[dict[str, str], list[tuple[float, float]]]) -> bytes:
    return orjson.dumps(
        {
            "status": "success",
            "data": {
                "resultType": "matrix",
                "result": [
                    {"metric": labels, "values": [[t, repr(v)] for t, v in points]} for labels, points in series
                ],
            },
        }
    )


VLLM = {
    "__name__": "vllm:generation_tokens_total",
    "namespace": "llm-serve",
    "pod": "vllm-0",
    "model_name": "llama-3-8b",
    "instance": "10.0.0.7:8000",
    "job": "vllm",
}


def bad(**change: object) -> str:
    rec: dict[str, object] = {
        "job_id": "x/y",
        "unit": "tokens",
        "quantity": 1,
        "start": "2026-11-02T10:00:00Z",
        "end": "2026-11-02T11:00:00Z",
    }
    rec.update(change)
    return orjson.dumps({k: v for k, v in rec.items() if v is not None}).decode()


def test_json_lines_records_with_their_owner_and_interval() -> None:
    text = "\n".join(
        [
            '{"job_id": "llm-serve/vllm-0", "unit": "tokens_generated", "quantity": 1843200, '
            '"start": "2026-11-02T10:00:00Z", "end": "2026-11-02T11:00:00Z", "model_name": "llama-3-8b"}',
            '{"job_id": 4815162, "unit": "samples", "quantity": 5e6, "start": "2026-11-02T10:00:00+01:00", '
            '"end": "2026-11-02T10:30:00+01:00", "cluster": "hpc"}',
            "",
            bad(unit="Tokens"),
            bad(quantity=-1),
            bad(start="2026-11-02T11:00:00Z", end="2026-11-02T10:00:00Z"),
            bad(quantity=None),
        ]
    )
    result = parse(text, cluster="c1")
    assert len(result.events) == 2 and len(result.dead_letters) == 4
    pod, job = (e.data for e in result.events)
    assert (pod.scheduler, pod.job_id, pod.unit, pod.quantity, pod.model_name) == (
        "kubernetes",
        "llm-serve/vllm-0",
        "tokens_generated",
        1843200.0,
        "llama-3-8b",
    )
    assert (job.scheduler, job.job_id, result.events[1].cluster) == ("slurm", "4815162", "hpc")
    assert job.start == datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
    reasons = " | ".join(d.reason for d in result.dead_letters)
    assert "unit" in reasons and "quantity" in reasons and "ends before it starts" in reasons and "missing" in reasons
    again = parse(text, cluster="c1")
    assert [e.id for e in again.events] == [e.id for e in result.events]  # the same record counts once


def test_vllm_counters_become_hourly_outputs_of_their_pod_with_resets() -> None:
    points = [(T0 + 60 * i, 1000.0 * i) for i in range(50)]  # 1000 tokens a minute, 10:00 to 10:49
    points += [(T0 + 60 * 50, 300.0)]  # the server restarted: 300 since the reset
    points += [(T0 + 60 * (50 + i), 300.0 + 1000.0 * i) for i in range(1, 20)]  # 10:51 to 11:09
    prompt = {**VLLM, "__name__": "vllm:prompt_tokens_total"}
    result = parse(matrix((VLLM, points), (prompt, [(T0, 0.0), (T0 + 60, 4096.0)])), cluster="c1")
    assert result.dead_letters == []
    got = {(e.data.unit, e.data.start.hour): e.data.quantity for e in result.events}
    assert got == {
        ("tokens_generated", 10): 49 * 1000.0 + 300.0 + 9 * 1000.0,
        ("tokens_generated", 11): 10 * 1000.0,
        ("tokens_prompt", 10): 4096.0,
    }
    assert {(e.data.scheduler, e.data.job_id, e.data.model_name) for e in result.events} == {
        ("kubernetes", "llm-serve/vllm-0", "llama-3-8b")
    }
    # a later read of the same hours gives the same ids: the warehouse keeps the newest
    later = parse(matrix((VLLM, points[:30])), cluster="c1")
    assert later.events[0].id == next(
        e.id for e in result.events if (e.data.unit, e.data.start.hour) == ("tokens_generated", 10)
    )


def test_a_counter_of_a_slurm_job_or_one_named_in_the_hints() -> None:
    series = {"__name__": "trainer_samples_total", "hpc_job": "4815162"}
    result = parse(
        matrix((series, [(T0, 0.0), (T0 + 30, 512.0)])), cluster="c1", metrics={"trainer_samples_total": "samples"}
    )
    assert [(e.data.scheduler, e.data.job_id, e.data.unit, e.data.quantity) for e in result.events] == [
        ("slurm", "4815162", "samples", 512.0)
    ]


def test_a_series_without_an_owner_is_a_dead_letter_and_other_input_is_refused() -> None:
    orphan = {"__name__": "vllm:generation_tokens_total", "instance": "10.0.0.7:8000"}
    result = parse(matrix((orphan, [(T0, 0.0), (T0 + 60, 5.0)]), (VLLM, [(T0, 0.0), (T0 + 60, 7.0)])), cluster="c1")
    assert len(result.events) == 1 and "names no pod" in result.dead_letters[0].reason
    with pytest.raises(NotThisFormat):
        parse(matrix(({"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0"}, [(T0, 1.0)])), cluster="c1")
    with pytest.raises(NotThisFormat):
        parse('{"job_id": "1", "path": "/ckpt", "bytes": 1}', cluster="c1")


def test_outputs_reach_the_workload_outputs_table() -> None:
    result = parse(
        '{"job_id": "ns/p", "unit": "requests", "quantity": 42, "start": "2026-11-02T10:00:00Z", '
        '"end": "2026-11-02T10:05:00Z"}',
        cluster="c1",
    )
    tables, activity = rows_for(result.events)
    (row,) = tables["workload_outputs"]
    assert isinstance(row, dict)
    assert (row["scheduler"], row["job_id"], row["unit"], row["quantity"], row["model_name"]) == (
        "kubernetes",
        "ns/p",
        "requests",
        42.0,
        "",
    )
    assert row["time"] == datetime(2026, 11, 2, 10, 5, tzinfo=UTC) and activity == {}
