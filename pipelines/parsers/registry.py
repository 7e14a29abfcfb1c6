"""The one registry of input parsers: each source's name, its parser, and how files are read.

``gpuledger ingest``, the demo, the simulator's manifests and the tests all parse files through
:func:`parse_files` / :func:`parse_manifest_entry`. Each parser detects its format from the
content; a file that is not that source's format raises ``NotThisFormat`` naming the file.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Any

from pipelines.clusters import ALL_CLUSTERS
from pipelines.parsers import checkpoint, dcgm, kubernetes, nccl, outputs, reference, slurm, storage
from pipelines.parsers.base import NotThisFormat, ParseResult


class Source(StrEnum):
    dcgm = "dcgm"
    slurm = "slurm"
    kubernetes = "kubernetes"
    storage = "storage"
    checkpoint = "checkpoint"
    outputs = "outputs"
    nccl = "nccl"
    org = "org"
    pricing = "pricing"


PARSERS: dict[Source, Callable[..., ParseResult]] = {
    Source.dcgm: dcgm.parse,
    Source.slurm: slurm.parse,
    Source.kubernetes: kubernetes.parse,
    Source.storage: storage.parse,
    Source.checkpoint: checkpoint.parse,
    Source.outputs: outputs.parse,
    Source.nccl: nccl.parse,
    Source.org: reference.parse_org,
    Source.pricing: reference.parse_pricing,
}


def parse_file(source: Source, path: Path, cluster: str, hints: dict[str, Any] | None = None) -> ParseResult:
    if not path.is_file():
        raise NotThisFormat(f"{path}: no such file")
    data = path.read_bytes()
    try:
        return PARSERS[source](data, cluster=cluster, origin=str(path), **(hints or {}))
    except NotThisFormat as exc:
        raise NotThisFormat(f"{path} is not {source.value} input: {exc}") from None


def input_files(given: list[Path]) -> list[Path]:
    """The files named; a directory stands for the files in it (sorted, hidden ones skipped)."""
    paths: list[Path] = []
    for path in given:
        if not path.is_dir():
            paths.append(path)
            continue
        inside = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        if not inside:
            raise NotThisFormat(f"{path}: no file in this directory")
        paths += inside
    return paths


def parse_files(source: Source, paths: list[Path], cluster: str, hints: dict[str, Any] | None = None) -> ParseResult:
    """Several files as one input: Kubernetes pods with their ResourceClaims and ResourceSlices are
    read together (:func:`pipelines.parsers.kubernetes.parse_files`); other sources file by file."""
    if len(paths) == 1 or source is not Source.kubernetes:
        result = ParseResult()
        for path in paths:
            result.extend(parse_file(source, path, cluster, hints))
        return result
    for path in paths:
        if not path.is_file():
            raise NotThisFormat(f"{path}: no such file")
    try:
        return kubernetes.parse_files([(p.read_bytes(), str(p)) for p in paths], cluster=cluster, **(hints or {}))
    except NotThisFormat as exc:
        raise NotThisFormat(f"not {source.value} input: {exc}") from None


def parse_manifest_entry(base: Path, entry: dict[str, Any], cluster: str) -> ParseResult:
    """One file of a simulator manifest, with the files it is read together with (``with``: a pods
    file's ResourceClaims and ResourceSlices) and its parser hints."""
    paths = [base / entry["path"], *(base / p for p in entry.get("with", ()))]
    return parse_files(Source(entry["source"]), paths, cluster, entry.get("hints"))


def summary(result: ParseResult) -> dict[str, Any]:
    by_type: dict[str, int] = {}
    for e in result.events:
        by_type[e.type] = by_type.get(e.type, 0) + 1
    reasons: dict[str, int] = {}
    for d in result.dead_letters:
        reasons[d.reason] = reasons.get(d.reason, 0) + 1
    return {
        "events": len(result.events),
        "dead_letters": len(result.dead_letters),
        "by_type": by_type,
        "dead_letter_reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])[:10]),
        "notes": list(result.notes),
    }


def default_cluster(source: Source, configured: str) -> str:
    """An org file ingested without ``--cluster`` applies to every cluster that has no version of
    its own in force (docs/ATTRIBUTION.md "Owner"); everything else belongs to the configured cluster."""
    return ALL_CLUSTERS if source is Source.org else configured
