"""The Slurm collector against a real Slurm cluster on this machine (infra/slurm/start.sh: munged,
MariaDB, slurmdbd, slurmctld and a slurmd with 8 typed GPUs), into the real Kafka broker.

Real jobs run: one that completes on two GPUs, a three-task array, one that fails with exit code 3,
one that is requeued while it runs and then completes, one cancelled while pending. The collector
polls the real ``squeue --json`` / ``sacct --json`` / ``sinfo --json``; what it publishes is compared
with what Slurm itself reports (sacct for states, attempts and times, ``scontrol show job -d`` for
the GPU indices) and with the prolog's dcgm-exporter job mapping. Nothing here fakes Slurm.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from infra.kafka.broker import ensure_topics
from pipelines import events as ev
from pipelines.settings import Settings
from tests.integration.pipeline import Pipeline, allocations

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
CLUSTER = "slurm-it"
NODE = "gpusim01"


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    state = tmp_path_factory.mktemp("slurm")
    env = {**os.environ, "SLURM_DIR": str(state), "SLURM_CLUSTER": CLUSTER, "SLURM_NODE": NODE}
    started = subprocess.run(
        ["bash", str(REPO / "infra/slurm/start.sh")], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        print(started.stdout)
        yield {**env, "SLURM_CONF": str(state / "slurm.conf")}
    finally:
        subprocess.run(["bash", str(REPO / "infra/slurm/stop.sh")], env=env, timeout=120, check=False)


def sh(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(list(args), env=env, capture_output=True, text=True, timeout=60, check=False, cwd="/tmp")
    assert done.returncode == 0, f"{args}: {done.stderr}"
    return done.stdout


def wait(what: str, predicate: Callable[[], bool], timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def squeue_state(env: dict[str, str], job: str) -> str:
    return sh(env, "squeue", "-h", "-j", job, "-o", "%T").strip()


def sacct_jobs(env: dict[str, str]) -> list[dict[str, Any]]:
    out = json.loads(sh(env, "sacct", "--json", "--allusers", "--duplicates", "-S", "now-1hour"))
    return out["jobs"]


def gpu_indices(env: dict[str, str], job: str) -> list[int]:
    """The GPU indices `scontrol show job -d` gives the job on the node (``IDX:0-1,4``)."""
    text = sh(env, "scontrol", "show", "job", "-d", job)
    idx = text.split("IDX:")[1].split(")")[0]
    out: list[int] = []
    for part in idx.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def collect(settings: Settings, env: dict[str, str], state_file: Path) -> dict[str, Any]:
    done = subprocess.run(
        [
            str(REPO / ".venv/bin/gpuledger"),
            "collect",
            "slurm",
            "--once",
            "--cluster",
            CLUSTER,
            "--nodes-cmd",
            "sinfo --json",
            "--state-file",
            str(state_file),
            "--format",
            "json",
        ],
        env={**env, **settings.process_env()},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary: dict[str, Any] = json.loads(done.stdout[done.stdout.index("{") :])
    return summary


def consume(settings: Settings) -> list[ev.Envelope]:
    return allocations(settings, quiet_ms=3000)


def epoch(value: Any) -> datetime | None:
    if isinstance(value, dict):  # data_parser v0.0.40+: {"set": …, "number": …}
        value = value.get("number") if value.get("set", True) else None
    return datetime.fromtimestamp(value, UTC) if value else None


def test_real_jobs_reach_kafka_as_slurm_reports_them(
    slurm: dict[str, str], isolated_settings: Settings, tmp_path: Path
) -> None:
    env = slurm
    ensure_topics(isolated_settings)
    state_file = tmp_path / "collector.state"
    sbatch = ("sbatch", "--parsable", "-p", "gpu")
    done = sh(
        env,
        *sbatch,
        "-A",
        "llm",
        "--gres=gpu:h100:2",
        "-J",
        "train",
        "--comment",
        "model=llama-8b",
        "--wrap",
        "sleep 3",
    ).strip()
    array = sh(
        env, *sbatch, "-A", "vision", "--gres=gpu:h100:1", "--array=0-2", "-J", "sweep", "--wrap", "sleep 2"
    ).strip()
    failing = sh(env, *sbatch, "-A", "vision", "--gres=gpu:h100:1", "-J", "crash", "--wrap", "sleep 1; exit 3").strip()
    requeued = sh(env, *sbatch, "-A", "llm", "--gres=gpu:h100:3", "-J", "requeue-me", "--wrap", "sleep 10").strip()
    later = sh(
        env, *sbatch, "-A", "llm", "--gres=gpu:h100:1", "-J", "never", "--begin=now+3600", "--wrap", "sleep 1"
    ).strip()

    # while the requeued job runs: the collector sees it running on the GPUs Slurm gave it, and the
    # prolog wrote the same GPUs into dcgm-exporter's job mapping
    wait("the job to run", lambda: squeue_state(env, requeued) == "RUNNING")
    indices = gpu_indices(env, requeued)
    mapping = Path(env["SLURM_DIR"]) / "job-mapping"

    def mapped() -> list[int]:
        return sorted(int(p.name) for p in mapping.iterdir() if requeued in p.read_text().split())

    # slurmctld may report the job running before the node's prolog has written every GPU's file
    # (and other jobs' prologs and epilogs rewrite the files meanwhile): wait for it, briefly
    wait("the prolog's job mapping", lambda: mapped() == indices, timeout_s=30)
    first = collect(isolated_settings, env, state_file)
    assert first["dead_letters"] == 0, first
    running = [e for e in consume(isolated_settings) if e.type == "allocation.running" and e.data.job_id == requeued]
    assert running and running[-1].data.gpu_indices == indices
    assert running[-1].data.node == NODE and running[-1].data.owner.account == "llm"

    sh(env, "scontrol", "requeue", requeued)
    wait("the requeued job to be pending", lambda: squeue_state(env, requeued) == "PENDING")
    # Slurm delays a requeue's start; started again within the second its old credential was revoked
    # in, slurmd refuses the launch ("Job credential revoked") and the attempt fails: let it pass
    time.sleep(2)
    sh(env, "scontrol", "update", f"jobid={requeued}", "starttime=now")
    sh(env, "scancel", later)
    wait("every job to finish", lambda: not sh(env, "squeue", "-h", "-o", "%i").strip(), timeout_s=120)
    sh(env, "scontrol", "update", f"nodename={NODE}", "state=drain", "reason=itest-maintenance")
    finished = {"COMPLETED", "FAILED", "CANCELLED", "REQUEUED"}
    wait(
        "sacct to record every end",
        lambda: all(j["state"]["current"] in finished for j in sacct_jobs(env)),
        timeout_s=60,
    )

    second = collect(isolated_settings, env, state_file)
    assert second["dead_letters"] == 0, second
    events = consume(isolated_settings)
    ended: dict[str, list[ev.Envelope]] = defaultdict(list)
    for e in {e.id: e for e in events}.values():  # both polls published what had ended by then: same ids
        if e.type == "allocation.ended":
            ended[e.data.job_id].append(e)
    for es in ended.values():
        es.sort(key=lambda e: e.data.attempt)

    # every attempt sacct records (requeues as their own rows) ended as sacct says, at its times
    by_job: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for job in sacct_jobs(env):
        array_task = job.get("array", {}).get("task_id") if isinstance(job.get("array"), dict) else None
        job_id = f"{job['array']['job_id']}_{array_task}" if array_task not in (None, {}) else str(job["job_id"])
        by_job[job_id].append(job)
    assert requeued in by_job and done in by_job and failing in by_job
    assert len([j for j in by_job if j.startswith(f"{array}_")]) == 3
    for job_id, rows in by_job.items():
        rows.sort(key=lambda j: epoch(j["time"]["start"]) or datetime.max.replace(tzinfo=UTC))
        got = sorted(ended[job_id], key=lambda e: e.data.attempt)
        assert [e.data.attempt for e in got] == list(range(1, len(rows) + 1)), job_id
        for row, e in zip(rows, got, strict=True):
            data = e.data
            assert data.start_time == epoch(row["time"]["start"]), job_id
            assert data.end_time == epoch(row["time"]["end"]), job_id
            gres = sum(t["count"] for t in row["tres"]["allocated"] if t["type"] == "gres" and t["name"] == "gpu")
            assert sum(g.count for g in data.gpus) == gres, job_id
            assert (data.outcome == "success") == (row["state"]["current"] == "COMPLETED"), job_id
    assert [e.data.outcome for e in ended[requeued]] == ["failure", "success"]
    assert ended[requeued][0].data.scheduler_state == "REQUEUED"
    (crash,) = ended[failing]
    assert crash.data.outcome == "failure" and crash.data.exit_code == 3
    # cancelled while pending: seen waiting, never holding a GPU
    never = [e for e in events if getattr(e.data, "job_id", None) == later]
    assert never and all(e.type == "allocation.pending" and e.data.node is None for e in never)
    assert later not in by_job or all(epoch(j["time"]["start"]) is None for j in by_job[later])
    (ok,) = ended[done]
    assert ok.data.outcome == "success" and ok.data.owner.comment == "model=llama-8b"

    # the drained node: a node.state event saying so
    states = [e.data for e in events if e.type == "node.state" and e.data.node == NODE]
    assert states and states[-1].state == "drained" and states[-1].reason == "itest-maintenance"
    assert states[-1].gpus == 8
    sh(env, "scontrol", "update", f"nodename={NODE}", "state=resume")


def test_a_drained_node_is_unavailable_capacity(
    slurm: dict[str, str], isolated_settings: Settings, tmp_path: Path
) -> None:
    """Drain the node, let a few seconds pass, resume it: the stream workers count every one of its 8
    GPUs unavailable from the drain's `node.state` event to the resume's."""
    env = slurm
    pipeline = Pipeline(isolated_settings, tmp_path)
    state_file = tmp_path / "collector.state"
    try:
        sh(env, "scontrol", "update", f"nodename={NODE}", "state=drain", "reason=itest-drain")
        assert collect(isolated_settings, env, state_file)["dead_letters"] == 0
        time.sleep(5)
        sh(env, "scontrol", "update", f"nodename={NODE}", "state=resume")
        wait("the node to be back", lambda: "drain" not in sh(env, "sinfo", "-h", "-n", NODE, "-o", "%T"))
        assert collect(isolated_settings, env, state_file)["dead_letters"] == 0
        states = sorted((e for e in consume(isolated_settings) if e.type == "node.state"), key=lambda e: e.time)
        drained = next(e for e in states if e.data.state == "drained" and e.data.reason == "itest-drain")
        back = next(e for e in states if e.data.state == "up" and e.time > drained.time)
        assert drained.data.gpus == back.data.gpus == 8
        pipeline.start_worker(0)
        pipeline.wait(timeout_s=300)
        start, end = drained.time.replace(minute=0, second=0, microsecond=0), back.time + timedelta(hours=1)
        expected = 8 * (back.time - drained.time).total_seconds()
        unavailable = functools.partial(pipeline.unavailable_gpu_seconds, start, end)
        wait("the drained windows to close", lambda: unavailable() >= expected - 0.01, timeout_s=120)
        assert unavailable() == pytest.approx(expected, abs=0.01)  # event times are kept to the millisecond
    finally:
        pipeline.stop_all()


def test_slurmrestd_answers_what_squeue_and_sinfo_answer(
    slurm: dict[str, str], isolated_settings: Settings, tmp_path: Path
) -> None:
    """The collector reading Slurm's REST API (slurmrestd on its unix socket, through curl, the way
    a wrapper command would) publishes the running job and the node as the commands make them."""
    env = slurm
    socket = Path(env["SLURM_DIR"]) / "run/slurmrestd.sock"
    assert socket.is_socket(), "infra/slurm/start.sh started no slurmrestd (apt package slurmrestd)"
    ensure_topics(isolated_settings)
    job = sh(
        env, "sbatch", "--parsable", "-p", "gpu", "-A", "llm", "--gres=gpu:h100:2", "-J", "rest", "--wrap", "sleep 30"
    ).strip()
    try:
        wait("the job to run", lambda: squeue_state(env, job) == "RUNNING")
        rest = f"curl -sf --unix-socket {socket} http://localhost/slurm/v0.0.38"
        done = subprocess.run(
            [
                str(REPO / ".venv/bin/gpuledger"),
                "collect",
                "slurm",
                "--once",
                "--cluster",
                CLUSTER,
                "--squeue-cmd",
                f"{rest}/jobs",
                "--sacct-cmd",
                "",
                "--nodes-cmd",
                f"{rest}/nodes",
                "--state-file",
                str(tmp_path / "rest.state"),
                "--format",
                "json",
            ],
            env={**env, **isolated_settings.process_env()},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert json.loads(done.stdout[done.stdout.index("{") :])["dead_letters"] == 0
        events = consume(isolated_settings)
        (running,) = [e.data for e in events if e.type == "allocation.running" and e.data.job_id == job]
        assert running.node == NODE and running.gpu_indices == gpu_indices(env, job)
        assert running.owner.account == "llm" and sum(g.count for g in running.gpus) == 2
        (node,) = [e.data for e in events if e.type == "node.state" and e.data.node == NODE]
        assert (node.state, node.gpus) == ("up", 8)
    finally:
        sh(env, "scancel", job)
