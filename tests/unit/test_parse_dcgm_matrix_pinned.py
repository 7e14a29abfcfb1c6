"""``dcgm.parse_query_range`` on a fixed set of varied answers gives what it gave when the outputs
were pinned (``tests/fixtures/pinned/dcgm_query_range.json``): the same events in the same order,
grouped into the same messages (version 2 or 3, the same ids, columns in the same order, the same
Python values), the same dead letters and notes, and the same choice of path (the columnar
:func:`dcgm_matrix.read` takes the answer or declines it).

The pins were written by the implementation before the columnar path was rewritten for speed; a
rewrite that changes any output fails here with the name of the case. Rewrite the pins
(``python -m tests.unit.test_parse_dcgm_matrix_pinned``) only for a change of behaviour meant as such.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.load import Load
from bench.sources import query_range_answer
from pipelines.gpu_columns import GpuColumns
from pipelines.parsers import dcgm, dcgm_matrix
from pipelines.parsers.base import NotThisFormat

# not a parser input, so outside fixtures/dcgm (which the fuzz tests read)
PINS = Path(__file__).parent.parent / "fixtures" / "pinned" / "dcgm_query_range.json"
T0 = 1_762_077_600
PROFILES = ["1g.10gb", "2g.20gb", "3g.40gb"]
# values each field takes as it is (no dead letter), then some that need a reason or a slow path
CLEAN = {
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ["0", "0.25", "1", "0.123456", "1e-3"],
    "DCGM_FI_DEV_GPU_UTIL": ["0", "50", "100", "7", "99"],
    "DCGM_FI_PROF_SM_ACTIVE": ["0.5", "0.999999", "0"],
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ["0.1", "0.9"],
    "DCGM_FI_PROF_DRAM_ACTIVE": ["0.3", "0"],
    "DCGM_FI_DEV_FB_USED": ["0", "1024", "60512.5", "81559"],
    "DCGM_FI_DEV_FB_FREE": ["80000", "21047", "0"],
    "DCGM_FI_DEV_POWER_USAGE": ["70.123", "612.5", "0"],
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ["1000000000", "1234567890123", "2147483640"],
    "DCGM_FI_DEV_GPU_TEMP": ["30", "45.5", "-5", "199"],
    "DCGM_FI_DEV_XID_ERRORS": ["0", "0", "79", "13"],
    "DCGM_FI_DEV_SM_CLOCK": ["1980", "NaN"],  # not read
    "up": ["1"],
}
SENTINELS = ["9223372036854775794", "2147483647", "2147483632", "140737488355328", "140737488355331"]
SPECIAL = ["NaN", "+Inf", "-1", "101", "1.5", "250", "79.5", "nan", "1e3", "+5", ".5", "5."]


def _labels(rng: random.Random, host_key: str, host: str, gpu: int, gi: str | None) -> dict[str, str]:
    labels = {"gpu": str(gpu), "UUID": f"GPU-{host}-{gpu}", host_key: host, "modelName": "NVIDIA H100 80GB HBM3"}
    if rng.random() < 0.15:
        del labels["gpu"]  # no index: ordered last
    if gi is not None:
        labels.update(GPU_I_ID=gi, GPU_I_PROFILE=rng.choice(PROFILES))
    if gpu % 2 == 0:
        labels.update(namespace=f"team-{gpu % 3}", pod=f"train-{gpu}", container="trainer")
    if rng.random() < 0.1:
        labels["hpc_job"] = str(1000 + gpu)
    return labels


def random_answer(seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """A matrix answer (and the hints to parse it with) drawn from ``seed``: several nodes, GPUs and
    MIG instances, gaps, fields missing for some GPUs, label changes over time, and by chance
    missing values, sentinels, bad values, repeated times, shared devices, unsorted points and series."""
    rng = random.Random(seed)
    bad = seed % 3 == 0  # a third of the cases hold records the columnar path cannot take
    step = rng.choice([30, 15, 60])
    n_times = rng.choice([1, 2, 5, 12, 40, 70])
    times: list[float] = [T0 + step * k for k in range(n_times)]
    if rng.random() < 0.2:
        times = [t + 0.5 for t in times]
    if rng.random() < 0.1:
        times = [t + rng.choice([0.001, 0.25, 0.123456]) for t in times]
    names = [n for n in CLEAN if rng.random() < 0.7] or ["DCGM_FI_DEV_GPU_TEMP"]
    host_key = rng.choice(["Hostname", "hostname", "instance", "node", "kubernetes_node"])
    series: list[dict[str, Any]] = []
    for n in range(rng.randint(1, 4)):
        host = f"node-{n}" + (":9400" if host_key == "instance" else "")
        for gpu in range(rng.randint(1, 5)):
            gis: list[str | None] = [None]
            if rng.random() < 0.25:
                gis = [None, *[str(i) for i in range(1, rng.randint(2, 4))]]
            for gi in gis:
                labels = _labels(rng, host_key, host, gpu, gi)
                change = rng.randrange(n_times) if rng.random() < 0.2 and n_times > 1 else None
                for name in names:
                    if rng.random() < 0.1:
                        continue  # a field this GPU does not export
                    kept = [t for t in times if rng.random() > 0.1] or times[:1]
                    pools = CLEAN[name]
                    values = [rng.choice(pools) for _ in kept]
                    if bad and rng.random() < 0.2:
                        values[rng.randrange(len(values))] = rng.choice(SPECIAL + SENTINELS)
                    elif rng.random() < 0.1:
                        values[rng.randrange(len(values))] = rng.choice(SENTINELS)
                    points: list[list[Any]] = [[_time(rng, t), v] for t, v in zip(kept, values, strict=True)]
                    if bad and rng.random() < 0.05:
                        points.append(list(points[0]))  # a time twice in a series
                    if rng.random() < 0.1:
                        rng.shuffle(points)
                    metric = {"__name__": name, **labels}
                    if rng.random() < 0.3:
                        metric = dict(reversed(list(metric.items())))  # labels in another order
                    if change is None:
                        series.append({"metric": metric, "values": points})
                        continue
                    split = [p for p in points if p[0] < times[change]], [p for p in points if p[0] >= times[change]]
                    later = {**metric, "pod": "next-pod", "namespace": "team-x"}
                    for part, m in zip(split, (metric, later), strict=True):
                        if part:
                            series.append({"metric": m, "values": part})
    if bad and series and rng.random() < 0.5:
        shared = dict(rng.choice(series))  # the same device under another pod at the same times
        shared["metric"] = {**shared["metric"], "pod": "other", "namespace": "ns2"}
        series.append(shared)
    if series and rng.random() < 0.2:
        series.append(dict(rng.choice(series)))  # a series twice: the first given wins
    if rng.random() < 0.3:
        rng.shuffle(series)
    hints = {"interval_s": rng.choice([None, None, 30.0]), "node": rng.choice([None, None, "hinted"])}
    return {"status": "success", "data": {"resultType": "matrix", "result": series}}, hints


def _time(rng: random.Random, t: float) -> float | int:
    return int(t) if t == int(t) and rng.random() < 0.9 else float(t)


GOOD = (
    b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL",'
    b'"gpu":"0","UUID":"GPU-0","Hostname":"n1"},"values":[[1762077600,"5"],[1762077630.5,"7.25"]]},'
    b'{"metric":{"__name__":"DCGM_FI_DEV_FB_USED","gpu":"0","UUID":"GPU-0","Hostname":"n1"},'
    b'"values":[[1762077600,"512"],[1762077630.5,"1024"],[1762077660,"2048"]]}]}}'
)
EDITS = {  # hand-made bytes: forms of numbers, odd labels, key orders, spacing
    "good": [],
    "exponent_time": [(b"[1762077630.5,", b"[1.7620776305e9,")],
    "exponent_time_upper": [(b"[1762077630.5,", b"[1.7620776305E+9,")],
    "value_forms": [(b'"7.25"]', b'"725e-2"]'), (b'"512"]', b'"+512"]')],
    "value_dot": [(b'"7.25"]', b'"7."]')],
    "negative_time": [(b"[1762077600,", b"[-1,")],
    "label_brackets": [
        (
            b'"Hostname":"n1"},"values":[[1762077600,"5"]',
            b'"Hostname":"n1","x":"]],[\\"a\\""},"values":[[1762077600,"5"]',
        )
    ],
    "values_first": [
        (
            b'{"metric":{"__name__":"DCGM_FI_DEV_FB_USED","gpu":"0","UUID":"GPU-0","Hostname":"n1"},'
            b'"values":[[1762077600,"512"],[1762077630.5,"1024"],[1762077660,"2048"]]}',
            b'{"values":[[1762077600,"512"],[1762077630.5,"1024"],[1762077660,"2048"]],'
            b'"metric":{"__name__":"DCGM_FI_DEV_FB_USED","gpu":"0","UUID":"GPU-0","Hostname":"n1"}}',
        )
    ],
    "spaced": [(b"],[", b"], [")],
    "empty_value": [(b'"5"]', b'""]')],
    "extra_key": [(b'"values":[[1762077600,"512"]', b'"x":1,"values":[[1762077600,"512"]')],
    "vector": [(b'"matrix"', b'"vector"')],
    "empty_values": [(b'"values":[[1762077600,"5"],[1762077630.5,"7.25"]]', b'"values":[]')],
    "unread_only": [
        (b"DCGM_FI_DEV_GPU_UTIL", b"DCGM_FI_DEV_SM_CLOCK"),
        (b"DCGM_FI_DEV_FB_USED", b"DCGM_FI_DEV_MEM_CLOCK"),
    ],
    "not_dcgm": [(b"DCGM_FI_DEV_GPU_UTIL", b"node_load1"), (b"DCGM_FI_DEV_FB_USED", b"node_load5")],
    "no_uuid": [(b'"UUID":"GPU-0",', b"")],
    "bad_mig": [(b'"gpu":"0",', b'"gpu":"0","GPU_I_ID":"x",')],
    "huge_time": [(b"[1762077660,", b"[1e300,")],
    "big_value": [(b'"2048"]', b'"1e308"]')],
}


def cases() -> dict[str, tuple[bytes, dict[str, Any]]]:
    out: dict[str, tuple[bytes, dict[str, Any]]] = {}
    for nodes, points, interval in [(1, 1, None), (2, 4, None), (1, 97, 30.0), (3, 40, None), (2, 33, 15.0)]:
        body = query_range_answer(Load(nodes, 30, node_prefix="p"), points)
        out[f"bench_{nodes}x{points}"] = body, {"interval_s": interval, "node": None}
    for seed in range(90):
        answer, hints = random_answer(seed)
        out[f"random_{seed}"] = orjson.dumps(answer), hints
    for name, edits in EDITS.items():
        body = GOOD
        for old, new in edits:
            assert old in body, name
            body = body.replace(old, new)
        out[f"edit_{name}"] = body, {"interval_s": None, "node": None}
    empty = b'{"status":"success","data":{"resultType":"matrix","result":[]}}'
    out["empty_result"] = empty, {"interval_s": None, "node": None}
    return out


def outcome(body: bytes, hints: dict[str, Any]) -> list[Any]:
    """Everything parse_query_range gives, in order, as plain values."""
    fast = dcgm_matrix.read(
        body,
        cluster="c1",
        node=hints["node"],
        interval_s=hints["interval_s"],
        fields=dcgm.FIELDS,
        describe=dcgm._series,
        blank=dcgm._is_blank,
    )
    try:
        result = dcgm.parse_query_range(body, cluster="c1", origin="pinned", **hints)
    except NotThisFormat as exc:
        return ["not this format", str(exc), fast is None]
    events = []
    for e in result.events:
        data = e.data
        assert isinstance(data, GpuColumns)
        events.append(
            [
                type(e).__name__,
                e.schema_version,
                e.id,
                repr(e.time),
                e.to_bytes().decode(),
                repr(data.columns),
                data.offset_us,
            ]
        )
    letters = [[d.topic, d.source, d.reason, d.raw, d.origin, d.id] for d in result.dead_letters]
    return [fast is None, events, letters, result.notes]


def digest(value: list[Any]) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:24]


def pins() -> dict[str, str]:
    return {name: digest(outcome(body, hints)) for name, (body, hints) in cases().items()}


PINNED: dict[str, str] = json.loads(PINS.read_text()) if PINS.exists() else {}
CASES = cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_output_is_the_pinned_output(name: str) -> None:
    body, hints = CASES[name]
    assert digest(outcome(body, hints)) == PINNED.get(name), "not pinned" if name not in PINNED else "changed"


def test_every_case_is_pinned_and_the_cases_vary() -> None:
    assert sorted(CASES) == sorted(PINNED)
    taken = [name for name, (body, hints) in CASES.items() if not outcome(body, hints)[0]]
    # both paths are covered: answers the columnar path takes and answers it declines
    assert 40 <= len(taken) <= len(CASES) - 20, len(taken)


if __name__ == "__main__":  # rewrite the pins (a change of behaviour meant as such)
    PINS.write_text(json.dumps(pins(), indent=1, sort_keys=True) + "\n")
