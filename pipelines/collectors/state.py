"""What a live collector must remember across restarts, in one small JSON file per collector.

Without it a restarted collector forgets its sacct cursor (jobs that ended while it was down never
get their end) and the pods it saw running (a pod deleted meanwhile stays "running" forever).
The file is replaced atomically (write to a temporary file, then rename) after every successful
poll, so a crash leaves either the previous or the new state, never half of one.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


class StateFile:
    """A JSON object on disk; ``None`` path: kept in memory only (one-shot runs, tests)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def load(self) -> dict[str, Any]:
        if self.path is None or not self.path.exists():
            return {}
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"collector state {self.path} is unreadable: {exc}") from None
        return data if isinstance(data, dict) else {}

    def save(self, data: dict[str, Any]) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as out:
                json.dump(data, out, sort_keys=True)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def default_state_path(home: Path, collector: str, cluster: str) -> Path:
    """``<home>/state/<collector>-<cluster>.json`` (GPULEDGER_HOME, beside the pid files and logs)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in cluster)
    return home / "state" / f"{collector}-{safe}.json"
