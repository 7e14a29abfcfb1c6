"""Every public file real tools wrote parses as ``SOURCES.md`` beside it says (issue 25).

Each row of its table "What each file should give" runs ``gpuledger ingest <source> --file <file>
--dry-run --format json [args]`` through the CLI: exit 0, no traceback, exactly those events by
type, at most that many dead letters, the node where the row names one, and a note saying why when
nothing came out. The rows are written out here (the test's own oracle) and checked against the
table, so a changed contract fails loudly. Where the directory is missing the tests skip and say so.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from typer.testing import CliRunner

from gpuledger.cli.main import app
from pipelines.parsers.registry import Source, parse_file
from tests.unit.realworld import REALWORLD, realworld_file

AT = "--time 2026-11-10T01:00:00Z"


class Row(NamedTuple):
    file: str
    source: str
    args: str
    by_type: dict[str, int]
    dead_letters: int
    node: str | None = None


ROWS = [
    Row("dcgm_l4_kops_scrape.prom", "dcgm", AT, {"gpu.sample": 1}, 0),
    Row("dcgm_h100_mig_kserve_issue512.prom", "dcgm", AT, {"gpu.sample": 1}, 0),
    Row("dcgm_a30_mig_issue317.prom", "dcgm", AT, {"gpu.sample": 1}, 0),
    Row(
        "dcgm_rtx2000_a30mig_lowercase_hostname_pr736.prom",
        "dcgm",
        f"{AT} --node gpu-node-1",
        {"gpu.sample": 1},
        0,
        node="gpu-node-1",
    ),
    Row("dcgm_v100_hostname_issue250.prom", "dcgm", AT, {"gpu.sample": 1}, 0),
    Row("dcgm_l40s_k8s_dcgm_issue226.prom", "dcgm", AT, {"gpu.sample": 1}, 0),
    Row("dcgm_prom_vector_l40s_upcloud.json", "dcgm", "", {"gpu.sample": 1}, 0),
    Row("dcgm_prom_vector_t4_rafay_pcie.json", "dcgm", "", {}, 0),
    Row("k8s_pods_list_minikube_kuard.json", "kubernetes", "", {}, 0),
    Row("nccl_all_reduce_a800_24ranks_12pods.log", "nccl", AT, {"benchmark.run": 1}, 0),
    Row("nccl_all_reduce_h100_16ranks_mpijob_launcher.log", "nccl", AT, {"benchmark.run": 1}, 0),
    Row("nccl_alltoall_h800_2_17_cuda_failure_issue355.log", "nccl", AT, {"benchmark.run": 1}, 1),
    Row("nccl_all_reduce_t4_efa_mpirun_tagged_output.log", "nccl", AT, {"benchmark.run": 1}, 0),
    Row("slurm_squeue_v0037_rivos.json", "slurm", "", {}, 0),
    Row("slurm_squeue_v0039_23.02.6_gpu8.json", "slurm", "", {"allocation.pending": 1, "allocation.running": 1}, 0),
    Row("slurm_sinfo_v0037_rivos.json", "slurm", AT, {"node.state": 4}, 0),
    Row("slurm_sinfo_N_v0039_rivos.json", "slurm", AT, {"node.state": 1}, 0),
    Row("storage_node_exporter_e2e_output.prom", "storage", f"{AT} --node node1", {"storage.counters": 1}, 0),
    Row("storage_mountstats_node_exporter_fixture.txt", "storage", f"{AT} --node node1", {"storage.counters": 1}, 0),
]


def _param(row: Row) -> Any:
    return pytest.param(row, id=row.file)


def ingest(row: Row) -> dict[str, Any]:
    path = realworld_file(row.file)
    argv = ["ingest", row.source, "--file", str(path), "--dry-run", "--format", "json", *shlex.split(row.args)]
    result = CliRunner().invoke(app, argv)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("row", [_param(row) for row in ROWS])
def test_public_file_parses_as_its_row_says(row: Row) -> None:
    summary = ingest(row)
    assert summary["by_type"] == row.by_type
    assert summary["dead_letters"] <= row.dead_letters, summary["dead_letter_reasons"]
    if not row.by_type:
        assert summary["notes"], f"{row.file} gave no event and no note saying why"
    if row.node is not None:
        hints = dict(zip(*[iter(a.removeprefix("--") for a in shlex.split(row.args))] * 2, strict=True))
        result = parse_file(Source(row.source), realworld_file(row.file), "c1", hints)
        assert {e.data.node for e in result.events} == {row.node}


def _table() -> list[Row]:
    text = (REALWORLD / "SOURCES.md").read_text()
    section = text.split("## What each file should give", 1)[1]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or not cells[0].endswith((".prom", ".json", ".log", ".txt")):
            continue
        file, source, args, events, dead = cells
        by_type = {kind: int(n) for kind, n in re.findall(r"([a-z]+\.[a-z]+): (\d+)", events)}
        node = re.search(r"on node (\S+)", events)
        rows.append(Row(file, source, args.strip("`"), by_type, int(dead), node.group(1) if node else None))
    return rows


def test_rows_here_are_the_table_of_sources_md() -> None:
    if not (REALWORLD / "SOURCES.md").is_file():
        pytest.skip(f"public real-world directory missing: {REALWORLD} (set GPULEDGER_REALWORLD_DIR)")
    assert _table() == ROWS


def test_ingest_help_documents_the_hint_flags() -> None:
    result = CliRunner().invoke(app, ["ingest", "--help"], terminal_width=200)
    assert result.exit_code == 0
    for flag in ("--node", "--time", "--collective", "--dry-run"):
        assert flag in result.output
    assert "exporter" in result.output  # --node: a dcgm scrape whose hostname is the exporter's pod


def test_directory_lookup_skips_with_a_reason(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tests.unit import realworld

    monkeypatch.setattr(realworld, "REALWORLD", tmp_path / "absent")
    with pytest.raises(pytest.skip.Exception, match="directory missing"):
        realworld.realworld_file("dcgm_l4_kops_scrape.prom")


def test_ingest_passes_the_hint_flags_to_the_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    from pipelines.parsers import registry

    seen: dict[str, Any] = {}
    real = registry.PARSERS[Source.nccl]

    def spy(data: bytes, **kwargs: Any) -> Any:
        seen.update(kwargs)
        return real(data, **kwargs)

    monkeypatch.setitem(registry.PARSERS, Source.nccl, spy)
    path = realworld_file("nccl_all_reduce_a800_24ranks_12pods.log")
    argv = ["ingest", "nccl", "--file", str(path), "--dry-run", "--format", "json", *shlex.split(AT)]
    result = CliRunner().invoke(app, [*argv, "--collective", "all_reduce_perf", "--node", "n1"])
    assert result.exit_code == 0, result.output
    assert (seen["collective"], seen["node"], seen["time"]) == ("all_reduce_perf", "n1", "2026-11-10T01:00:00Z")
