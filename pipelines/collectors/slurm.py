"""Live Slurm jobs → allocation events (topic ``scheduler.allocations``) by polling its commands.

Each poll runs, as subprocesses (no shell; each command line is split like a shell would):

* ``squeue --json`` — what is pending and running now (``allocation.pending``/``.running``);
* ``sacct --json --allusers --duplicates`` plus a time window — what ended since the previous poll
  (``allocation.ended``), including jobs that came and went between two polls; ``--duplicates``
  (added to a given command that lacks it) lists every attempt of a requeued job: without it only
  the latest attempt has a record and the earlier ones never get their end;
* optionally ``scontrol show nodes --json`` — drained/down nodes (``node.state``). The parser
  stamps node states with the poll time, so the collector passes on a node's state only when it
  differs from the last one it passed on (the first poll passes on every node).

Each output is parsed by :mod:`pipelines.parsers.slurm`. The commands are configurable, so the
collector can run off the cluster (``ssh head squeue --json``) or against a wrapper.

The sacct window is written as *relative* times (``-S now-<seconds> -E now-<seconds>``, a form
sacct accepts), so it does not depend on the time zone of the host running sacct. The first poll
reaches back to ``start`` (default: one hour); later polls reach back to the previous poll minus
``overlap_s``. With a ``state_file`` the cursor (and the node states passed on) survive a restart:
the first poll of a restarted collector reaches back to where the previous one stopped, so jobs
that ended while it was down get their end. With ``end`` the window is closed: one sacct run over
``start..end`` (squeue, which only knows the present, is not run) and the collector is finished.
``sacct_args`` replaces the computed window entirely (``--sacct-args "-S 2026-11-01 -E 2026-11-02"``).

Tested against a real Slurm 22.05.8 (data_parser v0.0.38, and slurmrestd's OpenAPI v0.0.38 jobs
and nodes through curl: tests/integration/test_slurm_real.py) and recorded v0.0.39–v0.0.41 output.

A command that cannot be started, exits non-zero or runs past ``timeout_s`` is
``SourceUnavailable``; output that is not Slurm JSON is ``NotThisFormat`` naming the command.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from pipelines.collectors.base import Batch
from pipelines.collectors.state import StateFile
from pipelines.errors import SourceUnavailable
from pipelines.parsers import slurm
from pipelines.parsers.base import NotThisFormat, ParseResult
from pipelines.times import from_epoch, parse_iso

SOURCE = slurm.SOURCE
DEFAULT_SQUEUE = "squeue --json"
DEFAULT_SACCT = "sacct --json --allusers --duplicates"
DEFAULT_LOOKBACK_S = 3600.0


def relative_window(start: datetime, end: datetime | None, now: float) -> list[str]:
    """sacct ``-S``/``-E`` arguments for ``start..end`` (``end`` None: now) relative to ``now``."""
    args = ["-S", _relative(start.timestamp(), now)]
    args += ["-E", "now" if end is None else _relative(end.timestamp(), now)]
    return args


def with_duplicates(command: list[str]) -> list[str]:
    """The sacct command with ``--duplicates`` (every requeued attempt of a job, not only the last)."""
    if any(arg in ("-D", "--duplicates") for arg in command):
        return command
    return [*command, "--duplicates"]


def _relative(t: float, now: float) -> str:
    offset = round(now - t)
    if offset == 0:
        return "now"
    return f"now-{offset}" if offset > 0 else f"now+{-offset}"


def run_command(command: list[str], timeout_s: float) -> bytes:
    """Run one command and return its stdout; every way it can fail is ``SourceUnavailable``."""
    shown = shlex.join(command)
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            timeout=timeout_s,
            check=False,  # noqa: S603
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise SourceUnavailable(
            f"`{shown}`: {command[0]} not found (set the command with --squeue-cmd/--sacct-cmd)"
        ) from None
    except PermissionError:
        raise SourceUnavailable(f"`{shown}`: {command[0]} is not executable") from None
    except subprocess.TimeoutExpired:
        raise SourceUnavailable(f"`{shown}` did not finish within {timeout_s:g}s") from None
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        why = lines[-1][:300] if lines else "no message"
        raise SourceUnavailable(f"`{shown}` exited with code {done.returncode}: {why}")
    return done.stdout


class SlurmCommands:
    """A collector polling squeue / sacct (/ scontrol) and parsing their JSON."""

    source = SOURCE

    def __init__(
        self,
        *,
        cluster: str,
        squeue_cmd: str | None = DEFAULT_SQUEUE,
        sacct_cmd: str | None = DEFAULT_SACCT,
        sacct_args: str | None = None,
        nodes_cmd: str | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
        overlap_s: float = 60.0,
        timeout_s: float = 120.0,
        workload_kind: str | None = None,
        clock: Callable[[], float] = time.time,
        state_file: Path | None = None,
    ) -> None:
        self.cluster = cluster
        self.squeue = shlex.split(squeue_cmd) if squeue_cmd else []
        self.sacct = with_duplicates(shlex.split(sacct_cmd)) if sacct_cmd else []
        self.sacct_args = shlex.split(sacct_args) if sacct_args else None
        self.nodes = shlex.split(nodes_cmd) if nodes_cmd else []
        if not (self.squeue or self.sacct or self.nodes):
            raise ValueError("nothing to run: squeue, sacct and nodes commands are all empty")
        if start is not None and end is not None and end < start:
            raise ValueError("the range ends before it starts")
        self.end = end
        self.overlap_s = overlap_s
        self.timeout_s = timeout_s
        self.workload_kind = workload_kind
        self._clock = clock
        self._since: datetime | None = start
        self._node_states: dict[object, tuple[object, object]] = {}
        self._state = StateFile(state_file)
        saved = self._state.load()
        if saved.get("since") and start is None:
            self._since = parse_iso(saved["since"])
        self._node_states.update({n: tuple(v) for n, v in saved.get("node_states", {}).items()})

    @property
    def closed(self) -> bool:
        return self.end is not None

    def poll(self) -> Batch:
        now = self._clock()
        observed = from_epoch(now)
        since = self._since or from_epoch(now - DEFAULT_LOOKBACK_S)
        result = ParseResult()
        notes = []
        if self.squeue and not self.closed:
            result.extend(self._parse(self.squeue, observed))
            notes.append("squeue")
        if self.sacct:
            window = self.sacct_args if self.sacct_args is not None else relative_window(since, self.end, now)
            result.extend(self._parse(self.sacct + window, observed))
            notes.append("sacct " + " ".join(window))
        if self.nodes and not self.closed:
            result.extend(self._changed_nodes(self._parse(self.nodes, observed)))
            notes.append("nodes")
        self._since = from_epoch(now - self.overlap_s)  # only after every command worked
        saved = {
            "since": self._since.isoformat(),
            "node_states": {str(n): list(v) for n, v in self._node_states.items()},
        }
        return Batch(result, final=self.closed, note="; ".join(notes), commit=lambda: self._state.save(saved))

    def _parse(self, command: list[str], observed: datetime) -> ParseResult:
        output = run_command(command, self.timeout_s)
        origin = "command:" + shlex.join(command)
        try:
            return slurm.parse(
                output, cluster=self.cluster, origin=origin, observed_at=observed, workload_kind=self.workload_kind
            )
        except NotThisFormat as exc:
            raise NotThisFormat(f"output of `{shlex.join(command)}` is not Slurm JSON: {exc}") from None

    def _changed_nodes(self, parsed: ParseResult) -> ParseResult:
        """Node states stamped with the poll time get a new id every poll: pass on only changes."""
        changed = []
        for event in parsed.events:
            data = event.data
            key = (getattr(data, "state", None), getattr(data, "reason", None))
            node = getattr(data, "node", None)
            if event.type != "node.state" or self._node_states.get(node) != key:
                self._node_states[node] = key
                changed.append(event)
        return ParseResult(changed, parsed.dead_letters)

    def close(self) -> None:
        return None
