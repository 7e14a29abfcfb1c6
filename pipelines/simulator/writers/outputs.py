"""``outputs/vllm_query_range.json``: the token counters of the inference servers, as Prometheus'
``query_range`` returns vLLM's ``vllm:generation_tokens_total`` and ``vllm:prompt_tokens_total``.

Every inference attempt runs a vLLM server: from its first scrape after its container started until
it ends, each scrape has a point of both counters, labelled with its pod (``namespace``, ``pod``,
``model_name``, as a ServiceMonitor's target labels give them) or, for a Slurm job, ``hpc_job``.
A counter starts at 0 at the server's first point; from one scrape to the next it rises by the
tokens the server produced, ``TOKENS_PER_GPU_S`` per second of fully busy GPU over the GPU
fractions it holds (``PROMPT_RATIO`` prompt tokens per generated one), in whole tokens. A restarted
container is a new server whose counters start again at 0.

``tokens(...)`` gives the same counts per model for the ground truth: what a reader of the
counters sees, from each server's first point to its last.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson

from pipelines.simulator.config import UNIT, SimConfig
from pipelines.simulator.dcgm_view import Metrics
from pipelines.simulator.model.jobs import Attempt, SimState
from pipelines.simulator.org import UNKNOWN_MODEL
from pipelines.simulator.writers.common import prom_value, write_text

FILE = "outputs/vllm_query_range.json"
TOKENS_PER_GPU_S = 1500.0
PROMPT_RATIO = 3
COUNTERS = (("vllm:generation_tokens_total", 1), ("vllm:prompt_tokens_total", PROMPT_RATIO))


@dataclass
class Server:
    attempt: Attempt
    steps: np.ndarray  # scrape indices with a point
    generated: np.ndarray  # the generation counter at those points


def servers(cfg: SimConfig, state: SimState, metrics: Metrics) -> list[Server]:
    step = cfg.scrape_interval_s
    out = []
    for attempt in sorted(state.attempts, key=lambda a: (a.start, a.job_id, a.number)):
        if attempt.spec.kind != "inference":
            continue
        end = attempt.end if attempt.end is not None else cfg.horizon
        k0, k1 = max(-(-attempt.run_start // step), 0), min(-(-end // step), cfg.steps)
        if k1 - k0 < 2:
            continue
        busy = np.zeros(k1 - k0)
        for slot in attempt.slots:
            busy += slot.weight / UNIT * metrics.entities[slot.series].util[k0:k1]
        per_step = np.round(busy * TOKENS_PER_GPU_S * step)
        counter = np.concatenate(([0.0], np.cumsum(per_step[:-1])))  # tokens made before each point
        out.append(Server(attempt, np.arange(k0, k1), counter))
    return out


def _model(attempt: Attempt) -> str:
    spec = attempt.spec
    return spec.model if spec.model_via != "none" and spec.model else UNKNOWN_MODEL


def tokens(servers_: list[Server]) -> dict[str, dict[str, float]]:
    """Per model (as the owner resolution names it): tokens_generated and tokens_prompt."""
    out: dict[str, dict[str, float]] = defaultdict(lambda: {"tokens_generated": 0.0, "tokens_prompt": 0.0})
    for s in servers_:
        last = float(s.generated[-1])
        out[_model(s.attempt)]["tokens_generated"] += last
        out[_model(s.attempt)]["tokens_prompt"] += last * PROMPT_RATIO
    return {k: dict(v) for k, v in sorted(out.items())}


def write_query_range(path: Path, cfg: SimConfig, servers_: list[Server]) -> None:
    parts = []
    for s in servers_:
        spec, attempt = s.attempt.spec, s.attempt
        labels = {"job": "vllm", "model_name": spec.model or "served-model"}
        if attempt.pod is not None:
            labels.update(namespace=spec.namespace or "default", pod=attempt.pod.name)
        else:
            labels["hpc_job"] = attempt.job_id
        times = [prom_value(cfg.start_epoch + int(k) * cfg.scrape_interval_s) for k in s.steps.tolist()]
        for name, ratio in COUNTERS:
            values = (s.generated * ratio).tolist()
            points = ",".join(f'[{t},"{prom_value(v)}"]' for t, v in zip(times, values, strict=True))
            metric = orjson.dumps(dict(sorted({"__name__": name, **labels}.items()))).decode()
            parts.append(f'{{"metric":{metric},"values":[{points}]}}')
    write_text(path, '{"status":"success","data":{"resultType":"matrix","result":[' + ",".join(parts) + "]}}")
