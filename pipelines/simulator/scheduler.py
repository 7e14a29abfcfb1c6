"""The discrete-event loop: arrivals, placements, attempt ends, retries, node failures.

Events are processed in time order (ties: ends, repairs, XIDs, arrivals), and after each instant
the pending queue is offered free slots (greedy backfill in priority order: acceptance runs
first, then by submission). All times are integer seconds from the window start; the loop stops
at the end of the window, leaving attempts running and jobs pending.

Retries: Slurm requeues preempted and node-failed jobs (same job id, ``restart_cnt + 1``,
avoiding the failed node); Kubernetes Jobs (``restartPolicy: Never``) create a new pod for any
failure but a deadline; ReplicaSet and notebook pods restart their container in place after an
OOM or error (attempts tile the pod's allocation, the back-off is held by the next attempt); a
ReplicaSet pod lost with its node is replaced by a new pod (a new logical job).
"""

from __future__ import annotations

import heapq
from dataclasses import replace

import numpy as np

from pipelines.simulator.checkpoints import record_checkpoints
from pipelines.simulator.config import SimConfig
from pipelines.simulator.failures import Fate, Guarantee, NodeFailure, draw_fate, restartable
from pipelines.simulator.model.cluster import Cluster, Slot
from pipelines.simulator.model.jobs import Attempt, JobSpec, Pod, SimState, XidInterval
from pipelines.simulator.placement import Pool
from pipelines.simulator.workload import k8s_suffix, new_uid

END, REPAIR, XID, ARRIVE = 0, 1, 2, 3
MAX_JOB_PODS = 4
MIN_XID_STEPS = 6  # a node failure late in the window is cut short, but shows for at least this


class Engine:
    def __init__(
        self,
        cfg: SimConfig,
        cluster: Cluster,
        specs: list[JobSpec],
        failures: list[NodeFailure],
        rng: np.random.Generator,
    ) -> None:
        self.cfg, self.cluster, self.rng = cfg, cluster, rng
        self.pool = Pool(cluster)
        self.specs = list(specs)
        self.attempts: list[Attempt] = []
        self.xids: list[XidInterval] = []
        self.heap: list[tuple[int, int, int, object]] = []
        self.seq = 0
        self.pending: list[JobSpec] = []
        self.avoid: dict[int, set[str]] = {}
        self.holders: dict[str, Attempt] = {}
        self.guarantee = Guarantee.default(cfg.horizon)
        self.armed: list[NodeFailure] = []  # node failures waiting for a busy GPU
        self.failed: set[int] = set()  # node failures that happened
        self.last_chances: set[int] = set()
        for spec in specs:
            if spec.reservation is not None:
                self.pool.reserve(spec.pinned_nodes, spec.reservation)
                self.push(spec.reservation[0], ARRIVE, spec)
            else:
                self.push(spec.submit, ARRIVE, spec)
        for failure in failures:
            self.push(failure.at, XID, failure)

    def push(self, t: int, kind: int, payload: object) -> None:
        heapq.heappush(self.heap, (t, kind, self.seq, payload))
        self.seq += 1

    def between(self, lo: int, hi: int) -> int:
        return int(self.rng.integers(lo, hi + 1))

    def run(self) -> SimState:
        handlers = {END: self.on_end, REPAIR: self.on_repair, XID: self.on_xid, ARRIVE: self.on_arrive}
        while self.heap and self.heap[0][0] < self.cfg.horizon:
            now = self.heap[0][0]
            while self.heap and self.heap[0][0] == now:
                _, kind, _, payload = heapq.heappop(self.heap)
                handlers[kind](now, payload)  # type: ignore[operator]
            self.schedule(now)
        for attempt in self.attempts:
            if attempt.end is None:
                record_checkpoints(attempt, self.cfg.horizon)
        return SimState(self.specs, self.attempts, self.xids)

    # --- arrivals and placement -----------------------------------------------------------
    def on_arrive(self, now: int, spec: JobSpec) -> None:
        if spec.scheduler == "kubernetes":
            name = f"{spec.name}-{k8s_suffix(self.rng)}" if spec.owner_kind == "Job" else spec.name
            policy = {"Job": "Never", "ReplicaSet": "Always"}.get(spec.owner_kind or "", "OnFailure")
            deadline = 3 * spec.work if spec.kind == "training" else None
            spec.pending_pod = Pod(name, new_uid(self.rng), now, restart_policy=policy, active_deadline=deadline)
        self.pending.append(spec)

    def schedule(self, now: int) -> None:
        waiting = []
        for spec in sorted(self.pending, key=lambda s: (s.kind != "benchmark", s.submit, s.seq)):
            slots = self.pool.place(spec, now, self.avoid.get(spec.seq, set()))
            if slots is None:
                if spec.reservation is not None:
                    spec.dropped = True
                else:
                    waiting.append(spec)
                continue
            self.pool.take(slots)
            self.start_new(spec, slots, now)
        self.pending = waiting

    def start_new(self, spec: JobSpec, slots: list[Slot], now: int) -> None:
        start = now + self.between(1, 3)
        number = len(spec.attempts) + 1
        if spec.scheduler == "slurm":
            if spec.reservation is not None:
                spec.nodes = len({s.gpu.node for s in slots})
            submit = spec.submit if number == 1 else spec.attempts[-1].end or now
            attempt = Attempt(
                spec,
                number,
                str(spec.slurm_id),
                str(spec.slurm_id),
                submit,
                start,
                start + self.between(2, 10),
                slots,
                0,
                eligible=now if number > 1 else spec.submit,
            )
        else:
            pod = spec.pending_pod
            assert pod is not None
            spec.pending_pod, pod.scheduled, pod.node = None, now, slots[0].gpu.node
            job_id = f"{spec.namespace}/{pod.name}"
            logical = f"{spec.namespace}/{spec.owner_name}" if spec.owner_kind == "Job" else job_id
            attempt = Attempt(
                spec,
                number if spec.owner_kind == "Job" else 1,
                job_id,
                logical,
                pod.created,
                start,
                start + self.between(3, 40),
                slots,
                0,
                pod=pod,
            )
        self.hold(attempt)
        self.begin(attempt)

    def hold(self, attempt: Attempt) -> None:
        for slot in attempt.slots:
            self.holders[slot.key] = attempt
        attempt.spec.attempts.append(attempt)
        self.attempts.append(attempt)

    # --- fates ----------------------------------------------------------------------------
    def remaining(self, attempt: Attempt) -> int:
        spec = attempt.spec
        if restartable(spec):
            return max(spec.attempts[0].run_start + spec.work - attempt.run_start, 60)
        return max(spec.work - spec.progress, 60)

    def begin(self, attempt: Attempt) -> None:
        horizon, spec = self.cfg.horizon, attempt.spec
        remaining = self.remaining(attempt)
        forced = self.guarantee.take(spec, attempt.run_start, remaining, horizon)
        requeued = spec.scheduler == "slurm" and attempt.number > 1
        if forced == "timeout" and requeued:  # a time limit is the job's: it cannot shrink after a run
            self.guarantee.owe(spec, forced)
            forced = None
        fate = draw_fate(spec, attempt.run_start, remaining, self.rng, horizon, forced)
        if fate.reason == "timeout" and requeued:
            fate = Fate(None, attempt.run_start + remaining)
        end = fate.end
        if fate.reason == "timeout":
            end = self.timeout_end(attempt, end)
        elif fate.reason == "preempted" and attempt.pod is not None and end < horizon:
            attempt.pod.disruption = end - self.between(2, 20)
            attempt.pod.deletion_ts = attempt.pod.disruption + 30
        attempt.planned_reason, attempt.forced = fate.reason, forced is not None
        attempt.planned_end = max(end, attempt.start + 1)
        self.push(attempt.planned_end, END, (attempt, attempt.version))
        self.trigger_armed(attempt)

    def trigger_armed(self, attempt: Attempt) -> None:
        """Let a waiting node failure strike this attempt's GPU at the next scrape time."""
        step, last = self.cfg.scrape_interval_s, (self.cfg.horizon - 1) // self.cfg.scrape_interval_s
        whole = any(slot.kind == "gpu" for slot in attempt.slots)
        for failure in self.armed:
            at = -(-(attempt.start + 1) // step) * step
            fits = at // step + MIN_XID_STEPS < last and attempt.planned_end > at + 180 and whole
            if failure.scheduler == attempt.spec.scheduler and attempt.spec.kind != "benchmark" and fits:
                self.armed.remove(failure)
                self.push(at, XID, replace(failure, node=attempt.nodes[0], at=at))
                return

    def timeout_end(self, attempt: Attempt, end: int) -> int:
        limit = max(end - attempt.start, 60)
        if attempt.pod is not None:
            attempt.pod.active_deadline = limit
            return attempt.start + limit + self.between(1, 5)
        minutes = -(-limit // 60)
        spec = attempt.spec
        spec.time_limit_min = min(spec.time_limit_min or minutes, minutes)
        return attempt.start + spec.time_limit_min * 60 + self.between(0, 20)

    # --- ends and retries -----------------------------------------------------------------
    def on_end(self, now: int, payload: tuple[Attempt, int]) -> None:
        attempt, version = payload
        if version != attempt.version:
            return
        attempt.end, attempt.reason = now, attempt.planned_reason
        record_checkpoints(attempt, now)
        spec = attempt.spec
        if restartable(spec) and attempt.reason in ("oom", "app_error"):
            self.restart_in_pod(attempt, now)
            return
        for slot in attempt.slots:
            if self.holders.get(slot.key) is attempt:
                del self.holders[slot.key]
        self.pool.release(attempt.slots)
        if attempt.pod is not None:
            self.pod_gone(attempt, now)
        self.retry(attempt, now)

    def restart_in_pod(self, prev: Attempt, now: int) -> None:
        index = prev.restart_index + 1
        backoff = min(10 * 2 ** (index - 1), 300)
        attempt = Attempt(
            prev.spec,
            prev.number + 1,
            prev.job_id,
            prev.logical_job,
            now,
            now,
            now + backoff + self.between(1, 3),
            prev.slots,
            0,
            pod=prev.pod,
            restart_index=index,
        )
        self.hold(attempt)
        self.begin(attempt)

    def pod_gone(self, attempt: Attempt, now: int) -> None:
        pod, reason = attempt.pod, attempt.reason
        assert pod is not None
        if reason == "node_failure":
            pod.phase_reason, pod.deletion_ts, pod.deleted = "NodeLost", now, now + self.between(1, 5)
        elif reason == "preempted":
            pod.deleted = now + 1
        else:
            pod.phase_reason = "DeadlineExceeded" if reason == "timeout" else None
            linger = (2, 30) if attempt.spec.kind == "notebook" else (300, 900)
            pod.deleted = now + self.between(*linger)
            pod.deletion_ts = pod.deleted

    def retry(self, attempt: Attempt, now: int) -> None:
        spec, reason = attempt.spec, attempt.reason
        if reason is None or spec.kind == "benchmark":
            return
        if reason == "node_failure":
            self.avoid[spec.seq] = set(attempt.nodes)
        if spec.scheduler == "slurm":
            if reason in ("preempted", "node_failure"):
                self.push(now + self.between(30, 150), ARRIVE, spec)
        elif spec.owner_kind == "Job":
            if reason != "timeout" and len(spec.attempts) < MAX_JOB_PODS:
                self.push(now + min(10 * 2 ** (len(spec.attempts) - 1), 360), ARRIVE, spec)
        elif spec.owner_kind == "ReplicaSet" and reason == "node_failure":
            life = spec.attempts[0].run_start + spec.work - now
            if life > 600:
                clone = replace(
                    spec,
                    seq=len(self.specs),
                    submit=now + self.between(1, 3),
                    work=life,
                    name=f"{spec.owner_name}-{k8s_suffix(self.rng)}",
                    attempts=[],
                    progress=0,
                )
                self.specs.append(clone)
                self.avoid[clone.seq] = set(attempt.nodes)
                self.push(clone.submit, ARRIVE, clone)

    # --- node failures --------------------------------------------------------------------
    def on_xid(self, now: int, failure: NodeFailure) -> None:
        step, last = self.cfg.scrape_interval_s, (self.cfg.horizon - 1) // self.cfg.scrape_interval_s
        down = {x.node for x in self.xids}
        nodes = [self.cluster.node(failure.node)] + [
            n for n in self.cluster.by_scheduler(failure.scheduler) if n.name != failure.node and n.name not in down
        ]
        held: list[Slot] = []
        for node in nodes:
            held = [
                s
                for s in node.slots
                if s.kind == "gpu"
                and s.gpu.uuid not in self.pool.blocked
                and self._breakable(self.holders.get(s.key), now)
            ]
            if held:
                break
        if failure.ident in self.failed:
            return
        if not held and not failure.last_chance:
            deadline = (last - MIN_XID_STEPS - 1) * step
            if now < deadline:
                if all(f.ident != failure.ident for f in self.armed):
                    self.armed.append(failure)  # wait for an attempt to start (see trigger_armed)
                if failure.ident not in self.last_chances:
                    self.last_chances.add(failure.ident)
                    self.push(deadline, XID, replace(failure, at=deadline, last_chance=True))
                return
        held.sort(key=lambda s: (self.holders[s.key].forced, self.holders[s.key].spec.kind != "training", s.gpu.index))
        free = [s for s in nodes[0].slots if s.kind == "gpu" and s.key in self.pool.free[nodes[0].name]]
        if not held and not free:
            return
        slot = (held or free)[0]
        self.failed.add(failure.ident)
        self.armed = [f for f in self.armed if f.ident != failure.ident]
        self.pool.block(slot)
        repaired = min(failure.repaired, last * step)
        self.xids.append(XidInterval(slot.gpu.uuid, slot.gpu.node, now, repaired))
        self.push(repaired, REPAIR, slot)
        holder = self.holders.get(slot.key) if held else None
        if holder is not None:
            if holder.forced and holder.planned_reason:
                self.guarantee.owe(holder.spec, holder.planned_reason)
            delay = self.between(20, 90) if holder.spec.scheduler == "slurm" else self.between(40, 100)
            holder.planned_reason, holder.planned_end = "node_failure", now + delay
            holder.xid_gpu, holder.xid_time = slot.gpu.uuid, now
            holder.version += 1
            if holder.pod is not None:
                holder.pod.disruption = holder.pod.deletion_ts = None
            self.push(holder.planned_end, END, (holder, holder.version))

    @staticmethod
    def _breakable(holder: Attempt | None, now: int) -> bool:
        return (
            holder is not None
            and holder.start <= now
            and holder.planned_end > now + 180
            and holder.spec.kind != "benchmark"
        )

    def on_repair(self, now: int, slot: Slot) -> None:
        self.pool.unblock(slot, held=slot.key in self.holders)


def run(
    cfg: SimConfig, cluster: Cluster, specs: list[JobSpec], failures: list[NodeFailure], rng: np.random.Generator
) -> SimState:
    return Engine(cfg, cluster, specs, failures, rng).run()
