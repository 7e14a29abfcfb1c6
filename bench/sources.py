"""Collector parse + publish rate per source: the real parser on an input of realistic size, then Kafka.

Each source's input is generated in memory, in the format and at the size one poll of its live
collector reads, and handed to the collector's own code path: the source's parser, then
``producer_sink`` (publish every event and dead letter, flush: the broker has acknowledged the
poll). Rate = GPU-samples (events × GPUs in them), or records for a source that is not metrics,
÷ (parse + publish seconds).

* ``dcgm_query_range`` — one ``query_range`` answer (``dcgm.parse_query_range`` from the answer's
  bytes, which its scan reads without a Python object per point) of every metric the collector
  selects that dcgm-exporter exports by default, for ``nodes`` × 8 GPUs over ``points`` steps of 30 s: one poll of
  ``gpuledger collect dcgm --prometheus`` catching up.
* ``dcgm_exposition`` — per scrape round, one ``/metrics`` body per node with dcgm-exporter's
  default counters (HELP/TYPE lines, unread counters included, no timestamps), each through
  ``dcgm.parse_exposition`` with the scrape time, as ``gpuledger collect dcgm --exporter`` does.

* ``kubernetes_pods`` — one pod list (``kubernetes.parse``, the path of ``gpuledger ingest
  kubernetes``) of ``pods`` GPU training pods (:mod:`bench.pods`); its rate is in allocation
  records (events) per second, not GPU-samples.

Steady state, as a collector that polls again and again sees it: per source, one uncounted warm-up
poll (the source's first input, parsed and published like the others) pays what only the first call
of a process pays (lazy imports, numpy's and pyarrow's first use, the producer's first connection
and topic metadata); then every input of the source is parsed and published ``ROUNDS`` times over,
each poll timed on its own, and the rates are over all the counted polls (samples of every counted
poll ÷ the sum of their seconds), parse + publish and parse alone alike. Every counted poll is
checked: exactly the GPU-samples or records its input holds, no dead letter.

Half of each node's GPUs are held by a pod (dcgm-exporter's ``namespace``/``pod``/``container``
labels). A generated input that does not parse into exactly the GPU-samples it holds is a bug of
this module and stops the run.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from bench import pods
from bench.load import CLUSTER, GPUS_PER_NODE, MODEL, Load
from pipelines.collectors.base import producer_sink
from pipelines.collectors.dcgm import METRICS
from pipelines.gpu_columns import GpuColumns
from pipelines.parsers import dcgm, kubernetes
from pipelines.parsers.base import ParseResult
from pipelines.producer import EventProducer
from pipelines.settings import Settings
from pipelines.simulator.writers.common import prom_value

QUERY_RANGE = "dcgm_query_range"
EXPOSITION = "dcgm_exposition"
PODS = "kubernetes_pods"
DRIVER = "550.127.05"
STEP_S = 30
ROUNDS = 5  # counted passes over each source's inputs, after one uncounted warm-up poll
# dcgm-exporter's default counters (etc/default-counters.csv): (name, type, help)
COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %)."),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "Total number of NVLink bandwidth counters for all lanes."),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active."),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", "The rate of data transmitted over the PCIe bus."),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", "The rate of data received over the PCIe bus."),
)
EXPORTED = frozenset(name for name, _, _ in COUNTERS)
SELECTED = tuple(m for m in METRICS if m in EXPORTED)  # what the Prometheus collector's query returns


@dataclass(frozen=True)
class Sizes:
    nodes: int
    points: int  # query_range steps in the one answer
    scrapes: int  # exposition rounds (one body per node each)
    pods: int  # in the pod list


def gpu_labels(load: Load, node: int, gpu: int) -> dict[str, str]:
    """dcgm-exporter's labels of one GPU, in its order; GPUs 0–3 held by a pod."""
    name = f"{load.node_prefix}-{node:04d}"
    labels = {
        "gpu": str(gpu),
        "UUID": f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{name}.{gpu}')}",
        "pci_bus_id": f"00000000:{0x18 + 0x20 * gpu:02X}:00.0",
        "device": f"nvidia{gpu}",
        "modelName": MODEL,
        "Hostname": name,
        "DCGM_FI_DRIVER_VERSION": DRIVER,
    }
    if gpu < GPUS_PER_NODE // 2:
        labels.update(container="trainer", namespace=f"team-{node % 6}", pod=f"train-{node}-worker-0")
    return labels


def value(metric: str, node: int, gpu: int, index: int) -> float:
    """A plausible reading of ``metric`` (deterministic, within the field's range)."""
    load = ((index * 7 + node * 3 + gpu * 11) % 100) / 100 if gpu < GPUS_PER_NODE // 2 else 0.0
    if metric.startswith("DCGM_FI_PROF_PCIE"):
        return round(load * 2.5e9)
    if metric.startswith("DCGM_FI_PROF_"):
        return round(load * (0.9 if "TENSOR" in metric else 1.0), 6)
    readings = {
        "DCGM_FI_DEV_GPU_UTIL": round(load * 100),
        "DCGM_FI_DEV_MEM_COPY_UTIL": round(load * 40),
        "DCGM_FI_DEV_FB_USED": 1024.0 * gpu + 60_000 * load,
        "DCGM_FI_DEV_POWER_USAGE": 70.0 + 600 * load,
        "DCGM_FI_DEV_FB_FREE": 81_559 - 1024.0 * gpu - 60_000 * load,
        "DCGM_FI_DEV_GPU_TEMP": 30 + 40 * load,
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 1e9 + index * 30_000.0 * (70 + 600 * load),
        "DCGM_FI_DEV_SM_CLOCK": 1980,
        "DCGM_FI_DEV_MEM_CLOCK": 2619,
        "DCGM_FI_DEV_MEMORY_TEMP": 45,
    }
    return float(readings.get(metric, 0))


def query_range_answer(load: Load, points: int) -> bytes:
    """A Prometheus ``query_range`` answer (matrix) of ``SELECTED`` for every GPU of the load."""
    times = [prom_value(load.round_time(i).timestamp()) for i in range(points)]
    series = []
    for node in range(load.nodes):
        for gpu in range(GPUS_PER_NODE):
            base = {
                **gpu_labels(load, node, gpu),
                "instance": f"10.0.{node // 250}.{node % 250}:9400",
                "job": "dcgm-exporter",
            }
            for metric in SELECTED:
                pairs = ",".join(f'[{t},"{prom_value(value(metric, node, gpu, i))}"]' for i, t in enumerate(times))
                labels = orjson.dumps(dict(sorted({"__name__": metric, **base}.items()))).decode()
                series.append(f'{{"metric":{labels},"values":[{pairs}]}}')
    return ('{"status":"success","data":{"resultType":"matrix","result":[' + ",".join(series) + "]}}").encode()


def exposition(load: Load, node: int, index: int) -> bytes:
    """One dcgm-exporter ``/metrics`` body of one node at scrape ``index`` (no timestamps)."""
    lines = []
    labels = [",".join(f'{k}="{v}"' for k, v in gpu_labels(load, node, gpu).items()) for gpu in range(GPUS_PER_NODE)]
    for metric, kind, text in COUNTERS:
        lines += [f"# HELP {metric} {text}", f"# TYPE {metric} {kind}"]
        lines += [f"{metric}{{{labels[g]}}} {prom_value(value(metric, node, g, index))}" for g in range(GPUS_PER_NODE)]
    return ("\n".join(lines) + "\n").encode()


# (parse one poll's input, what it holds: GPU-samples or records, and how to count them in the result)
Poll = tuple[Callable[[], ParseResult], int, Callable[[ParseResult], int]]


def query_range_polls(load: Load, points: int) -> list[Poll]:
    body = query_range_answer(load, points)

    def parse() -> ParseResult:
        return dcgm.parse_query_range(body, cluster=CLUSTER, interval_s=float(load.interval_s), origin="bench")

    return [(parse, load.nodes * GPUS_PER_NODE * points, gpu_samples)]


def exposition_polls(load: Load, scrapes: int) -> list[Poll]:
    polls: list[Poll] = []
    for index in range(scrapes):
        bodies = [(f"{load.node_prefix}-{node:04d}", exposition(load, node, index)) for node in range(load.nodes)]
        when = load.round_time(index)

        def parse(bodies: list[tuple[str, bytes]] = bodies, when: datetime = when) -> ParseResult:
            result = ParseResult()
            for host, body in bodies:
                result.extend(
                    dcgm.parse_exposition(
                        body,
                        cluster=CLUSTER,
                        scrape_time=when,
                        node=host,
                        interval_s=float(load.interval_s),
                        origin=f"http://{host}:9400",
                    )
                )
            return result

        polls.append((parse, load.nodes * GPUS_PER_NODE, gpu_samples))
    return polls


def gpu_samples(result: ParseResult) -> int:
    return sum(e.data.n if isinstance(e.data, GpuColumns) else len(getattr(e.data, "gpus", ())) for e in result.events)


def pod_list_polls(load: Load, count: int) -> list[Poll]:
    body = pods.pod_list(load, count)

    def parse() -> ParseResult:
        return kubernetes.parse(body, cluster=CLUSTER, origin="bench")

    # per pod: pending and running; ended too for the three quarters that finished
    return [(parse, 3 * count - len(range(0, count, 4)), _records)]


def _records(result: ParseResult) -> int:
    return len(result.events)


def parse_publish(settings: Settings, polls: list[Poll], rounds: int = ROUNDS) -> tuple[float, float, int]:
    """(parse seconds, publish seconds, GPU-samples or records) of ``rounds`` passes over the polls
    through the collector's sink, after one uncounted warm-up poll (the first) through the same sink."""
    parse_s = publish_s = 0.0
    samples = 0
    with EventProducer(settings) as producer:
        sink = producer_sink(producer)
        if polls:
            _poll(sink, polls[0])  # warm-up: the one-off costs of a process's first poll, not counted
        for _ in range(rounds):
            for poll in polls:
                parse_poll_s, publish_poll_s, got = _poll(sink, poll)
                parse_s += parse_poll_s
                publish_s += publish_poll_s
                samples += got
    return parse_s, publish_s, samples


def _poll(sink: Callable[[ParseResult], None], poll: Poll) -> tuple[float, float, int]:
    """(parse seconds, publish seconds, GPU-samples or records) of one poll; a wrong count or a dead
    letter stops the run."""
    parse, expected, count = poll
    began = time.perf_counter()
    result = parse()
    parsed = time.perf_counter()
    sink(result)
    published = time.perf_counter()
    got = count(result)
    if got != expected or result.dead_letters:
        raise ValueError(
            f"bench input gave {got} of its {expected} GPU-samples or records and "
            f"{len(result.dead_letters)} dead letters: fix bench/sources.py"
        )
    return parsed - began, published - parsed, got


def measure(settings: Settings, sizes: Sizes) -> dict[str, Any]:
    """``parse_publish_samples_per_s`` and ``parse_samples_per_s`` per source (GPU-samples/s, records/s for
    the pod list; over the counted polls, after the warm-up), and ``parse_items``: the GPU-samples or
    records of each input (one pass over the source's inputs)."""
    load = Load(sizes.nodes, STEP_S, node_prefix="src")
    inputs = {
        QUERY_RANGE: query_range_polls(load, sizes.points),
        EXPOSITION: exposition_polls(load, sizes.scrapes),
        PODS: pod_list_polls(load, sizes.pods),
    }
    both: dict[str, float] = {}
    parse_only: dict[str, float] = {}
    counts: dict[str, int] = {}
    for source, polls in inputs.items():
        parse_s, publish_s, samples = parse_publish(settings, polls)
        both[source] = round(samples / (parse_s + publish_s), 1)
        parse_only[source] = round(samples / parse_s, 1)
        counts[source] = sum(expected for _, expected, _ in polls)  # each counted poll gave exactly this
    return {"parse_publish_samples_per_s": both, "parse_samples_per_s": parse_only, "parse_items": counts}
