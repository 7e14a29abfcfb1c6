"""Formatting shared by the writers: numbers as Prometheus prints them, hostlists (times: ``pipelines.times``)."""

from __future__ import annotations

from pathlib import Path


def prom_value(value: float) -> str:
    """A sample value as Prometheus' JSON prints it (Go ``'f', -1``: shortest, never exponent)."""
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    text = repr(float(value))
    if "e" in text:
        text = f"{value:.12f}".rstrip("0").rstrip(".")
    return text


def compress_hostlist(names: list[str]) -> str:
    """``gpu009,gpu010,gpu012`` -> ``gpu[009-010,012]`` (one prefix; names share a digit width)."""
    if not names:
        return ""
    if len(names) == 1:
        return names[0]
    prefix = names[0].rstrip("0123456789")
    width = len(names[0]) - len(prefix)
    numbers = sorted(int(n[len(prefix) :]) for n in names)
    ranges: list[str] = []
    run_start = prev = numbers[0]
    for n in [*numbers[1:], -1]:  # -1: a sentinel that closes the last run
        if n == prev + 1:
            prev = n
            continue
        ranges.append(f"{run_start:0{width}d}" if run_start == prev else f"{run_start:0{width}d}-{prev:0{width}d}")
        run_start = prev = n
    return f"{prefix}[{','.join(ranges)}]"


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
