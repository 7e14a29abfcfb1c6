"""What the Slurm collector must know to bill right: every attempt's end, across restarts; array
tasks under the id GPU metrics carry; each node's physical GPUs."""

from __future__ import annotations

import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pipelines.collectors.base import collect_into, run
from pipelines.collectors.slurm import SlurmCommands, with_duplicates
from pipelines.collectors.state import StateFile, default_state_path
from pipelines.events import AllocationEvent, NodeStateEvent
from pipelines.parsers import slurm
from pipelines.parsers import slurm_fields as f
from pipelines.parsers.base import ParseResult

FIXTURES = Path(__file__).parent.parent / "fixtures" / "slurm"
B = datetime(2026, 3, 2, 12, 0, tzinfo=UTC).timestamp()
LOGGER = (
    "import json, pathlib, sys\nopen(sys.argv[1], 'a').write(json.dumps(sys.argv[3:]) + '\\n')\n"
    "sys.stdout.buffer.write(pathlib.Path(sys.argv[2]).read_bytes())\n"
)


def _command(tmp: Path, name: str, fixture: Path) -> tuple[str, Path]:
    script = tmp / "fake.py"
    script.write_text(LOGGER)
    log = tmp / f"{name}.log"
    return shlex.join([sys.executable, str(script), str(log), str(fixture)]), log


def _calls(log: Path) -> list[list[str]]:
    import json

    return [json.loads(line) for line in log.read_text().splitlines()]


def test_sacct_always_lists_every_attempt_of_a_requeued_job() -> None:
    assert with_duplicates(["sacct", "--json"]) == ["sacct", "--json", "--duplicates"]
    assert with_duplicates(["ssh", "login1", "sacct", "-D", "--json"]) == ["ssh", "login1", "sacct", "-D", "--json"]
    assert "--duplicates" in SlurmCommands(cluster="c", squeue_cmd="", sacct_cmd="sacct --json").sacct


def test_a_restarted_collector_resumes_sacct_where_the_previous_one_stopped(tmp_path: Path) -> None:
    sacct, log = _command(tmp_path, "sacct", FIXTURES / "sacct_v0041.json")
    state = tmp_path / "state" / "slurm-c1.json"
    now = [B]
    first = SlurmCommands(
        cluster="c1", squeue_cmd="", sacct_cmd=sacct, overlap_s=60, clock=lambda: now[0], state_file=state
    )
    run(first, collect_into(ParseResult()))
    assert state.exists()  # saved once the sink took the batch
    now[0] += 5 * 3600  # down for five hours
    second = SlurmCommands(
        cluster="c1", squeue_cmd="", sacct_cmd=sacct, overlap_s=60, clock=lambda: now[0], state_file=state
    )
    second.poll()
    windows = [call[call.index("-S") + 1] for call in _calls(log)]
    assert windows == ["now-3600", f"now-{5 * 3600 + 60}"]  # not the default hour: nothing ended unseen


def test_the_cursor_is_saved_only_after_the_batch_was_published(tmp_path: Path) -> None:
    sacct, _ = _command(tmp_path, "sacct", FIXTURES / "sacct_v0041.json")
    state = tmp_path / "slurm.json"
    collector = SlurmCommands(cluster="c1", squeue_cmd="", sacct_cmd=sacct, clock=lambda: B, state_file=state)

    def failing_sink(result: ParseResult) -> None:
        raise RuntimeError("broker gone")

    with pytest.raises(RuntimeError):
        run(collector, failing_sink)
    assert not state.exists()
    assert default_state_path(Path("/x"), "slurm", "a/b c") == Path("/x/state/slurm-a_b_c.json")
    assert StateFile(None).load() == {}


def _allocations(name: str) -> list[AllocationEvent]:
    result = slurm.parse((FIXTURES / name).read_bytes(), cluster="c1")
    return [e for e in result.events if isinstance(e, AllocationEvent)]


def test_array_tasks_keep_their_unique_slurm_job_id_as_alias() -> None:
    [task] = {e.data.aliases[0] for e in _allocations("sacct_v0039.json") if e.data.job_id == "1100_7"}
    assert task == "1107"
    squeue = _allocations("squeue_v0040.json")
    assert {tuple(e.data.aliases) for e in squeue if e.data.job_id == "3002_4"} == {("3006",)}
    assert all(e.data.aliases == [] for e in squeue if e.data.job_id in ("3001", "3002_[1-10]"))


@pytest.mark.parametrize(
    ("gres", "expected"),
    [
        ("gpu:h100:8(S:0-1)", (8, "h100")),
        ("gpu:8", (8, None)),
        ("gpu:a100:4(S:0),gpu:a100_1g.10gb:2(S:1),nic:2", (6, "a100")),
        ("nic:2", (None, None)),
        ("(null)", (None, None)),
        (None, (None, None)),
    ],
)
def test_node_gpu_count_from_gres(gres: Any, expected: tuple[int | None, str | None]) -> None:
    assert f.node_gpus(gres) == expected


def test_node_states_carry_the_node_gpu_count() -> None:
    result = slurm.parse(
        (FIXTURES / "scontrol_nodes_v0040.json").read_bytes(), cluster="c1", observed_at="2026-03-02T12:00:00Z"
    )
    states = [e.data for e in result.events if isinstance(e, NodeStateEvent)]
    assert states and all((s.gpus, s.gpu_model) == (8, "h100") for s in states)


def test_an_org_file_ingested_without_a_cluster_applies_to_every_cluster() -> None:
    from pipelines.clusters import ALL_CLUSTERS
    from pipelines.parsers.registry import Source, default_cluster

    assert default_cluster(Source.org, "prod") == ALL_CLUSTERS
    assert default_cluster(Source.pricing, "prod") == "prod"
    assert default_cluster(Source.slurm, "prod") == "prod"
