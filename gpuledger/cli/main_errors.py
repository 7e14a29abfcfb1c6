"""Errors the CLI maps to exit codes (2: input that is not the expected format or a bad option)."""

from __future__ import annotations


class UsageFailure(ValueError):
    """Bad input or option; exit code 2 with this one-line message."""
