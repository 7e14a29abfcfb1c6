"""The ground truth of what each model's work cost and what a million of its tokens cost.

The prices the simulator writes (``pricing.yaml``: GPU-hour rates, monthly shared costs, idle
policy ``spread``) applied to the simulation's own state, per UTC day the window touches, by the
cost model of DESIGN.md — the day's whole cost, as the daily cost assets compute it:

* compute and retries: every allocated GPU-second at its GPU model's hourly rate, to its owner;
* idle: the GPU-seconds of the window no one held (or that a fatal XID made unavailable) — every
  GPU's seconds minus the allocated ones — at their GPU model's rate, shared pro rata to every
  owner's allocated GPU-hours of the day;
* network, support, operations: each monthly amount spread evenly over the seconds of its month,
  from the price version's start to the end of the day, shared pro rata to allocated GPU-hours;
* storage: likewise, pro rata to the bytes each owner's Slurm jobs read and wrote on Lustre that
  day (every increase of a job's counters over the scrape before it), GPU-hours on a day without.

Per model the owners' shares add up (the shares are linear in the weights), so the truth is kept
per model. Cost per million tokens: that cost over the tokens the model's vLLM servers produced
(generated and prompt), times 10⁶.
"""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from pipelines.simulator.config import UNIT, SimConfig
from pipelines.simulator.model.cluster import Cluster
from pipelines.simulator.model.jobs import SimState
from pipelines.simulator.sharing import ClaimShares
from pipelines.simulator.writers.reference import GPU_HOURLY, MONTHLY
from pipelines.simulator.writers.storage import JobCounters
from pipelines.times import from_epoch

DAY = 86400
BY_BYTES = ("storage",)


def _month_seconds(day_start: datetime) -> int:
    # the month's length is worked out here, not with pipelines.times.month_bounds: this is the
    # ground truth the cost assets are checked against, so it shares none of their calendar code
    first = day_start.replace(day=1)
    following = (first + timedelta(days=32)).replace(day=1)
    return int((following - first).total_seconds())


def cost_by_model(
    cfg: SimConfig, cluster: Cluster, state: SimState, keys: Any, prices_from: int, lustre: dict[str, JobCounters]
) -> dict[str, float]:
    """Each model's cost over the UTC days of the window (``keys(attempt)`` names its model;
    ``prices_from`` is the offset the price version starts at)."""
    first_day = (cfg.start_epoch // DAY) * DAY - cfg.start_epoch  # offsets of UTC midnights
    days = list(range(first_day, cfg.horizon, DAY))
    rate = {m: float(v) for m, v in GPU_HOURLY.items()}
    gpus_of_model: dict[str, int] = defaultdict(int)
    for node in cluster.nodes:
        gpus_of_model[node.model.short] += len(node.gpus)
    cost: dict[str, list[float]] = defaultdict(list)
    shares = ClaimShares(state.attempts, cfg.horizon)
    for d in days:
        a, b = max(d, 0), min(d + DAY, cfg.horizon)
        held: dict[tuple[str, str], float] = defaultdict(float)  # (model, GPU model) → GPU-seconds
        bytes_moved: dict[str, float] = defaultdict(float)
        for attempt in state.attempts:
            end = attempt.end if attempt.end is not None else cfg.horizon
            lo, hi = max(attempt.start, a), min(end, b)
            if hi <= lo:
                continue
            model = keys(attempt)
            for slot in attempt.slots:
                gpu_model = cluster.node(slot.gpu.node).model.short
                for p0, p1, weight in shares.pieces(slot, lo, hi):
                    held[(model, gpu_model)] += weight / UNIT * (p1 - p0)
        for attempt in state.attempts:  # the owner of a job's bytes: the model of its attempts
            if attempt.job_id in lustre and attempt.number == 1:
                bytes_moved[keys(attempt)] += lustre[attempt.job_id].moved(cfg, d, d + DAY)
        weights: dict[str, float] = defaultdict(float)
        for (model, gpu_model), seconds in held.items():
            weights[model] += seconds
            cost[model].append(seconds * rate[gpu_model] / 3600)
        total_weight = sum(weights.values())
        if total_weight <= 0:
            continue
        idle = 0.0
        for gpu_model, n in gpus_of_model.items():
            pool = n * (b - a) - sum(s for (_, g), s in held.items() if g == gpu_model)
            idle += pool * rate[gpu_model] / 3600
        day_start = from_epoch(cfg.start_epoch + d)
        in_force = d + DAY - max(d, prices_from)
        shared = {term: amount * in_force / _month_seconds(day_start) for term, amount in MONTHLY.items()}
        total_bytes = sum(bytes_moved.values())
        for model, w in weights.items():
            cost[model].append(idle * w / total_weight)
            for term, amount in shared.items():
                share = bytes_moved[model] / total_bytes if term in BY_BYTES and total_bytes > 0 else w / total_weight
                cost[model].append(amount * share)
    return {model: math.fsum(parts) for model, parts in sorted(cost.items())}


def per_million_tokens(cost: dict[str, float], tokens: dict[str, dict[str, float]]) -> dict[str, float]:
    """Cost per million tokens (generated and prompt) of every model whose servers produced some."""
    out = {}
    for model, made in sorted(tokens.items()):
        units = made["tokens_generated"] + made["tokens_prompt"]
        if units > 0:
            out[model] = cost.get(model, 0.0) / units * 1e6
    return out
