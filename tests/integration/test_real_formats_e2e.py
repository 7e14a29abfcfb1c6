"""A held-out hour of two clusters in real formats, through `ingest`'s parsers, Kafka and a worker.

The files are written here the way the sources print them (Prometheus ``query_range`` JSON of
dcgm-exporter series, a pod list, ``squeue --json`` and ``sacct --json`` without ``--duplicates``,
``scontrol show nodes --json``, an org file per cluster), with the conditions real clusters produce:

* node k1: one H100 time-sliced by the GPU Operator's default — three pods ask for plain
  ``nvidia.com/gpu: 1`` and hold replicas ``GPU-k1::0..2``;
* node s1: Slurm job 500's first attempt on GPU index 0; the node's second GPU shows XID 79 at
  +20 min and is never heard of again; the job is requeued and its second attempt starts on s2 at
  +40 min — ``sacct`` (no ``--duplicates``) only knows the second attempt;
* node s2: the second attempt (no GPU indices), and a GPU nobody holds that is busy (a rogue process);
* node s3: drained at +30 min.

The expected numbers below are worked out by hand, per second, from that description — not by
gpuledger's attribution code.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pipelines.parsers.registry import Source, parse_file
from pipelines.producer import EventProducer
from pipelines.settings import Settings
from sql.client import get_client
from tests.integration.pipeline import Pipeline

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 10, 0, 0, tzinfo=UTC)
HOUR = 3600
STEP = 30
H100 = "NVIDIA H100 80GB HBM3"


def _epoch(minutes: float) -> int:
    return int(T0.timestamp() + minutes * 60)


def _iso(minutes: float) -> str:
    return (T0 + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _series(name: str, node: str, uuid: str, index: int, values: list[tuple[int, float]]) -> dict[str, Any]:
    return {
        "metric": {
            "__name__": name,
            "Hostname": node,
            "UUID": uuid,
            "gpu": str(index),
            "device": f"nvidia{index}",
            "modelName": H100,
            "instance": f"{node}:9400",
            "job": "gpu-metrics",
        },
        "values": [[t, f"{v:g}"] for t, v in values],
    }


def dcgm_file(path: Path) -> None:
    times = [_epoch(0) + STEP * i for i in range(HOUR // STEP)]
    fell = _epoch(20)
    gpus = [
        ("k1", "GPU-k1", 0, 0.8),
        ("s1", "GPU-s1-0", 0, 0.5),
        ("s1", "GPU-s1-1", 1, 0.0),
        ("s2", "GPU-s2-0", 0, 0.6),
        ("s2", "GPU-s2-1", 1, 0.3),
        ("s3", "GPU-s3-0", 0, 0.0),
    ]
    result = []
    for node, uuid, index, util in gpus:
        seen = [t for t in times if uuid != "GPU-s1-1" or t <= fell]  # GPU-s1-1 fell off the bus
        result.append(_series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", node, uuid, index, [(t, util) for t in seen]))
        result.append(
            _series(
                "DCGM_FI_DEV_XID_ERRORS",
                node,
                uuid,
                index,
                [(t, 79 if t == fell and uuid == "GPU-s1-1" else 0) for t in seen],
            )
        )
    path.write_text(json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}))


def pods_file(path: Path) -> None:
    def pod(k: int) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"serve-{k}",
                "namespace": "serving",
                "uid": f"uid-serve-{k}",
                "resourceVersion": str(100 + k),
                "creationTimestamp": _iso(-1),
                "labels": {"team": "serving"},
                "annotations": {"gpuledger.io/devices": f"GPU-k1::{k}"},
            },
            "spec": {
                "nodeName": "k1",
                "restartPolicy": "Always",
                "containers": [
                    {
                        "name": "main",
                        "image": "srv:1",
                        "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}},
                    }
                ],
            },
            "status": {
                "phase": "Running",
                "startTime": _iso(0),
                "containerStatuses": [
                    {
                        "name": "main",
                        "image": "srv:1",
                        "ready": True,
                        "restartCount": 0,
                        "state": {"running": {"startedAt": _iso(0)}},
                        "lastState": {},
                    }
                ],
            },
        }

    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "PodList",
                "metadata": {"resourceVersion": "200"},
                "items": [pod(k) for k in range(3)],
            }
        )
    )


def _number(value: int) -> dict[str, Any]:
    return {"set": True, "infinite": False, "number": value}


def squeue_file(path: Path) -> None:
    job = {
        "account": "vision",
        "array_job_id": _number(0),
        "array_task_id": {"set": False, "infinite": False, "number": 0},
        "comment": "",
        "end_time": _number(_epoch(24 * 60)),
        "gres_detail": ["gpu:h100:1(IDX:0)"],
        "job_id": 500,
        "job_state": ["RUNNING"],
        "name": "train",
        "node_count": _number(1),
        "nodes": "s1",
        "partition": "h100",
        "restart_cnt": 0,
        "start_time": _number(_epoch(0)),
        "state_reason": "None",
        "submit_time": _number(_epoch(-5)),
        "tres_alloc_str": "cpu=8,node=1,gres/gpu=1,gres/gpu:h100=1",
        "tres_req_str": "cpu=8,node=1,gres/gpu=1",
        "user_name": "ana",
        "wckey": "",
    }
    meta = {"plugin": {"data_parser": "v0.0.40"}, "command": ["squeue", "--json"]}
    path.write_text(
        json.dumps(
            {"meta": meta, "jobs": [job], "last_backfill": _number(_epoch(10)), "last_update": _number(_epoch(10))}
        )
    )


def sacct_file(path: Path) -> None:
    gres = [
        {"type": "gres", "name": "gpu", "id": 1001, "count": 1},
        {"type": "gres", "name": "gpu:h100", "id": 1002, "count": 1},
    ]
    job = {
        "account": "vision",
        "comment": {"administrator": "", "job": "", "system": ""},
        "array": {"job_id": 0, "task": "", "task_id": {"set": False, "infinite": False, "number": 0}},
        "association": {"account": "vision", "user": "ana"},
        "exit_code": {"status": ["SUCCESS"], "return_code": _number(0)},
        "job_id": 500,
        "name": "train",
        "nodes": "s2",
        "partition": "h100",
        "restart_cnt": 1,
        "state": {"current": ["RUNNING"], "reason": "None"},
        "time": {"elapsed": 1200, "end": 0, "start": _epoch(40), "submission": _epoch(-5)},
        "tres": {"allocated": gres, "requested": gres},
        "user": "ana",
        "wckey": {"wckey": "", "flags": []},
    }
    path.write_text(
        json.dumps({"meta": {"plugin": {"data_parser": "v0.0.41"}, "command": ["sacct", "--json"]}, "jobs": [job]})
    )


def nodes_file(path: Path) -> None:
    node = {
        "name": "s3",
        "hostname": "s3",
        "state": ["IDLE", "DRAIN"],
        "reason": "fabric maintenance",
        "reason_changed_at": _number(_epoch(30)),
        "gres": "gpu:h100:1(S:0)",
    }
    path.write_text(json.dumps({"meta": {"plugin": {"data_parser": "v0.0.40"}}, "nodes": [node]}))


def org_file(path: Path, units: dict[str, list[str]]) -> None:
    lines = ["versions:", f"  - effective_from: {_iso(-24 * 60)}", "    business_units:"]
    lines += [f"      {unit}: [{', '.join(teams)}]" for unit, teams in units.items()]
    lines += ["    accounts:", "      vision: vision"]
    path.write_text("\n".join(lines) + "\n")


def publish(pipeline: Pipeline, tmp: Path, cluster: str, units: dict[str, list[str]]) -> None:
    files = [
        (Source.dcgm, "dcgm.json", dcgm_file),
        (Source.kubernetes, "pods.json", pods_file),
        (Source.slurm, "squeue.json", squeue_file),
        (Source.slurm, "sacct.json", sacct_file),
        (Source.slurm, "nodes.json", nodes_file),
    ]
    with EventProducer(pipeline.settings) as producer:
        for source, name, write in [*files, (Source.org, "org.yaml", lambda p: org_file(p, units))]:
            path = tmp / f"{cluster}-{name}"
            write(path)
            result = parse_file(source, path, cluster)
            assert not result.dead_letters, (name, result.dead_letters[:1])
            for event in result.events:
                producer.publish(event)


@pytest.fixture
def pipeline(isolated_settings: Settings, tmp_path: Path):
    p = Pipeline(isolated_settings, tmp_path)
    yield p
    p.stop_all()


def _hours(pipeline: Pipeline, by: str, cluster: str) -> dict[str, dict[str, float]]:
    rows = pipeline.query("gpu_hours", {"by": by, "start": T0, "end": T0 + timedelta(hours=1), "cluster": cluster})
    return {str(r["key"]): {k: float(v) * 3600 for k, v in r.items() if k.endswith("_hours")} for r in rows}


def test_an_hour_of_real_conditions_in_real_formats(pipeline: Pipeline, tmp_path: Path) -> None:
    pipeline.start_worker(0)
    publish(pipeline, tmp_path, "east", {"research": ["vision"], "product": ["serving"]})
    publish(pipeline, tmp_path, "west", {"science": ["vision"], "apps": ["serving"]})
    pipeline.wait(timeout_s=300)

    for cluster, (vision_unit, serving_unit) in (("east", ("research", "product")), ("west", ("science", "apps"))):
        team = _hours(pipeline, "team", cluster)
        # three replicas of one GPU: 3 × 1/4 of it, busy util/4 each — never three GPUs
        assert team["serving"]["allocated_gpu_hours"] == pytest.approx(3 * 0.25 * HOUR, abs=0.01)
        assert team["serving"]["busy_gpu_hours"] == pytest.approx(3 * 0.8 / 4 * HOUR, abs=0.01)
        # attempt 1 on s1 for 40 min (ended by attempt 2's start, failure waste), attempt 2 for 20 min
        assert team["vision"]["allocated_gpu_hours"] == pytest.approx(3600.0, abs=0.01)
        assert team["vision"]["failed_gpu_hours"] == pytest.approx(2400.0, abs=0.01)
        assert team["vision"]["busy_gpu_hours"] == pytest.approx(0.5 * 2400, abs=0.01)
        # k1 1/4 + s1 GPU 0 after +40 + s1 GPU 1 before +20 + s2 GPU 0 before +40 + s2 GPU 1 + s3 before +30
        assert team["__unallocated__"]["gpu_hours"] == pytest.approx(900 + 1200 + 1200 + 2400 + 3600 + 1800, abs=0.01)
        # busy without an owner: s1 GPU 0 after +40 (0.5), s2 GPU 0 before +40 (0.6), s2 GPU 1 (0.3)
        assert team["__unallocated__"]["busy_gpu_hours"] == pytest.approx(600 + 1440 + 1080, abs=0.5)
        # the GPU that fell off the bus, and the drained node
        assert team["__unavailable__"]["gpu_hours"] == pytest.approx(2400 + 1800, abs=0.01)
        units = _hours(pipeline, "business_unit", cluster)
        assert {k: round(v["allocated_gpu_hours"], 2) for k, v in units.items() if not k.startswith("__")} == {
            vision_unit: 3600.0,
            serving_unit: 2700.0,
        }
        reasons = _hours(pipeline, "failure_reason", cluster)
        assert reasons["unknown"]["allocated_gpu_hours"] == pytest.approx(2400.0, abs=0.01)

    windows = pipeline.query("usage_inventory_gaps", {"start": T0, "end": T0 + timedelta(hours=1), "limit": 5})
    assert windows == []  # every window's facts are its node's physical GPUs
    client = get_client(pipeline.settings)
    try:
        rows = client.query(
            "SELECT cluster, node, min(physical_gpus), max(physical_gpus), count() FROM fact_windows FINAL "
            "WHERE window_start >= {s:DateTime64(3, 'UTC')} AND window_start < {e:DateTime64(3, 'UTC')} "
            "GROUP BY cluster, node",
            parameters={"s": T0, "e": T0 + timedelta(hours=1)},
        ).result_rows
    finally:
        client.close()
    physical = {(str(c), str(n)): (float(lo), float(hi), int(count)) for c, n, lo, hi, count in rows}
    assert physical == {
        (c, n): g
        for c in ("east", "west")
        for n, g in (("k1", (1.0, 1.0, 60)), ("s1", (2.0, 2.0, 60)), ("s2", (2.0, 2.0, 60)), ("s3", (1.0, 1.0, 60)))
    }
