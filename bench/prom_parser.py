"""Exposition parsing rate: gpuledger's readers against prometheus_client's parser, and what each refuses.

The input is one scrape round of dcgm-exporter ``/metrics`` bodies as ``bench/sources.py``
generates them (``sources.exposition``: ``nodes`` nodes × 8 GPUs, dcgm-exporter's default counters
with HELP/TYPE lines, no timestamps, pod labels on half the GPUs). Each parser reads every body;
the rate is exposition samples (sample lines of the input, read or not) per second, the best of
``--repeat`` runs (the machine is shared):

* ``dcgm_parse_exposition`` — ``dcgm.parse_exposition`` with the scrape time, as
  ``gpuledger collect dcgm --exporter`` calls it (its fast path, :mod:`pipelines.parsers.dcgm_text`).
* ``prom_read_exposition`` — ``prom.read_exposition``, the general strict line reader, every sample
  (``prom_read_exposition_dcgm_fields``: with ``wanted``, as dcgm's line-by-line path calls it).
* ``prometheus_client`` — ``prometheus_client.parser.text_string_to_metric_families``, iterating
  every sample of every family.

Then each odd line of :data:`ODD_LINES` is put to both general readers: accepted (name, labels,
value, timestamp) or refused. Usage::

    python -m bench.prom_parser [--nodes 32] [--repeat 7]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterable
from typing import Any

import orjson
from prometheus_client.parser import text_string_to_metric_families

from bench.load import GPUS_PER_NODE, Load
from bench.sources import STEP_S, exposition, gpu_samples
from pipelines.parsers import dcgm, prom

# lines the exposition format (Prometheus' Go parser) refuses or reads otherwise, one per case
ODD_LINES: tuple[tuple[str, str], ...] = (
    ("two values", "m 1 2 3"),
    ("no space before the value", 'm{a="1"}1'),
    ("timestamp with a fraction", "m 1 1762077600000.5"),
    ("NaN timestamp", "m 1 NaN"),
    ("timestamp out of range", "m 1 99999999999999999"),
    ("Arabic-Indic digits", "m \u0661\u0662"),
    ("unknown escape in a label value", 'm{a="x\\ty"} 1'),
    ("duplicate label", 'm{a="1",a="2"} 1'),
    ("quoted UTF-8 metric name", '{"gpu.temp",a="1"} 1'),
    ("counter without _total", "# TYPE c counter\nc 5"),
    ("bad line among good ones", "ok 1\nm{a=1} 2\nok 3"),
)


def bodies(nodes: int) -> list[str]:
    """One scrape round: the ``/metrics`` text of every node (scrape 0)."""
    load = Load(nodes, STEP_S, node_prefix="src")
    return [exposition(load, node, 0).decode() for node in range(nodes)]


def with_dcgm(texts: list[str]) -> int:
    """GPU-samples read by ``dcgm.parse_exposition`` (each body is one scrape of 8 GPUs)."""
    load = Load(len(texts), STEP_S, node_prefix="src")
    when = load.round_time(0)
    gpus = 0
    for node, text in enumerate(texts):
        host = f"src-{node:04d}"
        result = dcgm.parse_exposition(
            text, cluster="bench", scrape_time=when, node=host, interval_s=float(STEP_S), origin=f"http://{host}:9400"
        )
        if result.dead_letters:
            raise ValueError(f"dcgm.parse_exposition dead-lettered a generated body: {result.dead_letters[0]}")
        gpus += gpu_samples(result)
    return gpus


def with_prom(texts: list[str]) -> int:
    return sum(len(_read(text, None).samples) for text in texts)


def with_prom_dcgm_fields(texts: list[str]) -> int:
    return sum(len(_read(text, dcgm.FIELDS).samples) for text in texts)


def with_prometheus_client(texts: list[str]) -> int:
    return sum(1 for text in texts for family in text_string_to_metric_families(text) for _ in family.samples)


def _read(text: str, wanted: Iterable[str] | None) -> prom.Reading:
    reading = prom.read_exposition(text, wanted=wanted)
    if reading.bad:
        raise ValueError(f"prom.read_exposition refused a generated line: {reading.bad[0]}")
    return reading


PARSERS: dict[str, Callable[[list[str]], int]] = {
    "dcgm_parse_exposition": with_dcgm,
    "prom_read_exposition": with_prom,
    "prom_read_exposition_dcgm_fields": with_prom_dcgm_fields,
    "prometheus_client": with_prometheus_client,
}


def best_seconds(parse: Callable[[list[str]], int], texts: list[str], repeat: int, expected: int) -> float:
    """The quickest of ``repeat`` runs; every run must give ``expected`` (else the input or parser is wrong)."""
    best = float("inf")
    for _ in range(repeat):
        began = time.perf_counter()
        got = parse(texts)
        best = min(best, time.perf_counter() - began)
        if got != expected:
            raise ValueError(f"{parse.__name__} gave {got}, expected {expected}")
    return best


def measure(nodes: int, repeat: int) -> dict[str, Any]:
    """Samples/s of each parser: the input's sample lines (read or skipped) ÷ the best run's seconds."""
    texts = bodies(nodes)
    names = [line.split("{", 1)[0] for text in texts for line in text.split("\n") if line and line[0] != "#"]
    expected = {
        "dcgm_parse_exposition": nodes * GPUS_PER_NODE,  # GPU-samples
        "prom_read_exposition": len(names),
        "prom_read_exposition_dcgm_fields": sum(name in dcgm.FIELDS for name in names),
        "prometheus_client": len(names),
    }
    rates = {
        name: round(len(names) / best_seconds(parse, texts, repeat, expected[name]), 1)
        for name, parse in PARSERS.items()
    }
    return {"nodes": nodes, "samples_per_round": len(names), "repeat": repeat, "samples_per_s": rates}


def odd_line(text: str) -> dict[str, list[str]]:
    """What each general reader makes of ``text``: ``name labels value timestamp`` per sample, or why not."""
    reading = prom.read_exposition(text)
    ours = [_show(s.name, s.labels, s.value, s.time and s.time.timestamp()) for s in reading.samples]
    ours += [f"refused: {reason}" for _, reason in reading.bad]
    theirs: list[str] = []
    try:
        for family in text_string_to_metric_families(text):
            theirs += [_show(s.name, s.labels, s.value, s.timestamp) for s in family.samples]
    except ValueError as exc:
        theirs.append(f"ValueError, the lines after it unread: {str(exc)[:60]}")
    return {"gpuledger": ours, "prometheus_client": theirs}


def _show(name: str, labels: dict[str, str], value: float, seconds: Any) -> str:
    return f"{name} {labels} {value!r} {seconds!r}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(orjson.dumps(measure(args.nodes, args.repeat)).decode())
    for case, text in ODD_LINES:
        print(orjson.dumps({"case": case, "text": text, **odd_line(text)}).decode())


if __name__ == "__main__":
    main()
