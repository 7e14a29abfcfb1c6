"""Where the public files real tools wrote live (``SOURCES.md`` beside them says what each must give).

They are read in place, never copied into the repository. ``GPULEDGER_REALWORLD_DIR`` overrides the
directory; where it is missing the tests that need it skip and say so (CI has it).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REALWORLD = Path(os.environ.get("GPULEDGER_REALWORLD_DIR", "/work/shared/realworld"))


def realworld_file(name: str) -> Path:
    """The path of one public file, or a skip that names the missing directory or file."""
    path = REALWORLD / name
    if not path.is_file():
        what = "directory" if not REALWORLD.is_dir() else "file"
        pytest.skip(
            f"public real-world {what} missing: {path if what == 'file' else REALWORLD} (set GPULEDGER_REALWORLD_DIR)"
        )
    return path
