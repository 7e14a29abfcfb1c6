"""Kubernetes pods (lists, single pods, watch streams) -> allocation events; nodes -> node states.

Accepted input (auto-detected; anything else raises ``NotThisFormat``):

* a pod list: ``{"kind": "PodList", "items": [...]}`` from the API, or ``kubectl get pods -A -o
  json`` (``{"kind": "List", "items": [...]}``); items without ``kind`` are pods, items of other
  kinds are skipped;
* a single Pod object (``kubectl get pod x -o json``), or several concatenated;
* a node list (``{"kind": "NodeList"}`` or ``kubectl get nodes -o json``): one ``node.state``
  per node (:mod:`pipelines.parsers.kubernetes_nodes`: NotReady, cordoned, its physical GPUs);
* ResourceClaims and ResourceSlices (``kubectl get resourceclaims -A -o json``, ``kubectl get
  resourceslices -o json``: ``kind: List`` or ``ResourceClaimList``/``ResourceSliceList``, or bare
  objects), in the same input as the pods or in inputs given with them (:func:`parse_files`): the
  GPUs pods hold through DRA claims (:mod:`pipelines.parsers.kubernetes_dra`). Alone, without pods,
  they give no event and a note saying the pods are needed;
* watch events ``{"type": "ADDED"|"MODIFIED"|"DELETED"|"BOOKMARK"|"ERROR", "object": {...}}``, one
  per line (the API's watch stream) or pretty-printed one after another (``kubectl get pods -w
  --output-watch-events -o json``). A line may carry an extra ``"time"`` key (RFC 3339) saying
  when the event was observed.

A snapshot (pod lists and bare pods) is fed to the tracker in ``creationTimestamp`` order, so
Job retries are numbered by creation; watch events are fed in file order. Every event in a watch
stream is seen, so every container restart is an attempt boundary; a snapshot shows only the last
terminated run (see :mod:`pipelines.parsers.kubernetes_tracker` for the attempt scheme, and
:mod:`pipelines.parsers.kubernetes_pod` / :mod:`pipelines.parsers.kubernetes_outcome` for GPUs,
device ids, owners and failure classes). Pods holding no GPU (no GPU resource, no GPU claim)
produce no events, and one note counting them.

A value that is not valid JSON (a truncated last line, say) or not a pod/watch event is a dead
letter with its line number in ``origin``; the rest of the file is still parsed.

Hints: ``replicas`` (time-slicing replicas per GPU when the pod does not say; default 4),
``workload_kind`` (default kind for pods without a kind label), ``devices`` (a
``parse_pod_resources`` mapping),
``observed_at`` (when the file was captured: the last resort end time of a pod deleted without
any time on it).
"""

from __future__ import annotations

import json
from collections.abc import Container, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from pipelines.parsers.base import NotThisFormat, ParseResult, gc_paused
from pipelines.parsers.kubernetes_dra import LIST_KINDS, is_dra_object
from pipelines.parsers.kubernetes_nodes import is_node, node_state
from pipelines.parsers.kubernetes_tracker import SOURCE, TOPIC, WATCH_TYPES, DeviceMap, PodTracker
from pipelines.parsers.sched_events import (
    RECORD_ERRORS,
    add_record_events,
    as_dict,
    decode_text,
    hint_time,
    raw_text,
)
from pipelines.times import optional_time

GPU_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpu.shared")
_DECODER = json.JSONDecoder()
_LAST = datetime.max.replace(tzinfo=UTC)


def parse(data: bytes | str, *, cluster: str, origin: str | None = None, **hints: Any) -> ParseResult:
    """Parse a pod list, pod object(s) or a watch-event stream (with claims and slices, if any)."""
    return parse_files([(data, origin)], cluster=cluster, **hints)


def parse_files(inputs: Sequence[tuple[bytes | str, str | None]], *, cluster: str, **hints: Any) -> ParseResult:
    """Parse several inputs ``(data, origin)`` as one: pods in one file, their ResourceClaims and
    ResourceSlices in others (``kubectl get pods|resourceclaims|resourceslices -o json``). Every
    input must be Kubernetes JSON; claims and slices are read before any pod."""
    values: list[tuple[Any, str, str | None]] = []
    for data, origin in inputs:
        with gc_paused(data):
            found = list(_json_values(decode_text(data, "Kubernetes JSON")))
        if not any(_shape(value) for value, _, _ in found):
            where = f"{origin}: " if origin and len(inputs) > 1 else ""
            raise NotThisFormat(
                f"{where}not Kubernetes JSON: no pod list, Pod object, ResourceClaim, "
                "ResourceSlice or watch event found"
            )
        values += [(value, raw, f"{origin}:{line}" if origin else None) for value, raw, line in found]
    return _parse(values, cluster=cluster, hints=hints)


def _parse(values: list[tuple[Any, str, str | None]], *, cluster: str, hints: dict[str, Any]) -> ParseResult:
    tracker = PodTracker(cluster=cluster, replicas=hints.get("replicas"), workload_kind=hints.get("workload_kind"))
    if hints.get("devices"):
        tracker.set_devices(hints["devices"])
    observed_at = hint_time(hints)
    result = ParseResult()
    _read_dra(values, tracker, result)
    snapshot: list[tuple[dict[str, Any], str | None]] = []
    pods = 0
    for value, raw, where in values:
        shape = _shape(value)
        if shape == "watch":
            if not is_dra_object(value.get("object")):
                pods += 1
                result.extend(tracker.feed(value, observed_at=observed_at, raw=raw, origin=where))
        elif shape == "list" and value["kind"] not in LIST_KINDS:
            for item in value["items"]:
                if _is_pod(item):
                    snapshot.append((item, where))
                elif is_node(item):
                    _add_node(result, item, cluster, observed_at, where)
                elif not isinstance(item, dict) or "kind" not in item:  # other kinds are skipped
                    result.reject(
                        topic=TOPIC.name,
                        source=SOURCE,
                        reason="list item is not a pod",
                        raw=raw_text(item),
                        origin=where,
                    )
        elif shape == "pod":
            snapshot.append((value, where))
        elif shape is None:
            reason = "not valid JSON" if value is _INVALID else "not a pod, pod list or watch event"
            result.reject(topic=TOPIC.name, source=SOURCE, reason=reason, raw=raw, origin=where)
    snapshot.sort(key=lambda item: _creation(item[0]))
    for pod, where in snapshot:
        result.extend(tracker.observe(pod, observed_at=observed_at, origin=where))
    if tracker.dra and not snapshot and not pods:
        result.note(
            "ResourceClaims and ResourceSlices alone attribute nothing: give the pods that hold them "
            "(`kubectl get pods -A -o json`) in the same ingest (several --file, or a directory)"
        )
    no_gpu = tracker.no_gpu_note()
    if no_gpu:
        result.note(no_gpu)
    return result


def _read_dra(values: list[tuple[Any, str, str | None]], tracker: PodTracker, result: ParseResult) -> None:
    """Every ResourceClaim and ResourceSlice of the inputs (listed, bare, or in watch events) into
    the tracker's inventory; a malformed one is a dead letter."""
    for value, raw, where in values:
        shape = _shape(value)
        if shape == "list":
            objs = _dra_items(value)
        elif shape == "dra":
            objs = [value]
        elif shape == "watch" and is_dra_object(value.get("object")) and value["type"] != "DELETED":
            objs = [value["object"]]
        else:
            continue
        for obj in objs:
            try:
                tracker.dra.add(obj)
            except RECORD_ERRORS as exc:
                result.reject(
                    topic=TOPIC.name,
                    source=SOURCE,
                    reason=f"{obj.get('kind')}: {exc}",
                    raw=raw_text(obj) if shape == "list" else raw,
                    origin=where,
                )


def parse_pod_resources(obj: Any) -> dict[tuple[str, str, str], list[str]]:
    """Device ids per ``(namespace, pod, container)`` from the kubelet PodResources ``List()`` JSON.

    Shape: ``{"pod_resources": [{"name", "namespace", "containers": [{"name", "devices":
    [{"resource_name": "nvidia.com/gpu", "device_ids": ["GPU-…"]}]}]}]}`` (protobuf JSON's
    camelCase spellings ``podResources``/``resourceName``/``deviceIds`` too). Only GPU resources
    (``nvidia.com/gpu``, ``nvidia.com/gpu.shared``, ``nvidia.com/mig-*``) are kept; malformed
    entries are skipped. Raises ``NotThisFormat`` when there is no pod resources list at all.
    """
    if isinstance(obj, bytes | str):
        try:
            obj = orjson.loads(obj)
        except orjson.JSONDecodeError:
            raise NotThisFormat("not PodResources JSON: not valid JSON") from None
    pods = _either(obj, "pod_resources", "podResources") if isinstance(obj, dict) else None
    if not isinstance(pods, list):
        raise NotThisFormat("not PodResources JSON: no pod_resources list")
    devices: dict[tuple[str, str, str], list[str]] = {}
    for pod in pods:
        if not isinstance(pod, dict) or not isinstance(pod.get("name"), str):
            continue
        for container in pod.get("containers") or []:
            ids = _container_device_ids(container)
            if ids and isinstance(container.get("name"), str):
                key = (str(pod.get("namespace") or "default"), pod["name"], container["name"])
                devices.setdefault(key, []).extend(ids)
    return devices


def merge_pod_resources(
    known: DeviceMap, answer: DeviceMap, keep: Container[tuple[str, str]]
) -> dict[tuple[str, str, str], list[str]]:
    """A newer PodResources answer merged into what was known (pure).

    A pod the answer names gets exactly the ids it names (a container it no longer lists is
    dropped); a pod it does not name keeps its known ids while ``(namespace, pod)`` is in ``keep``
    (the collector still follows it: the kubelet forgets a finished pod before its end is
    published, and that end names the GPUs it held); anything else is forgotten.
    """
    named = {(namespace, pod) for namespace, pod, _ in answer}
    merged = {key: list(ids) for key, ids in known.items() if key[:2] not in named and key[:2] in keep}
    merged.update((key, list(ids)) for key, ids in answer.items())
    return merged


def _container_device_ids(container: Any) -> list[str]:
    if not isinstance(container, dict) or not isinstance(container.get("devices") or [], list):
        return []
    ids: list[str] = []
    for device in container.get("devices") or []:
        if not isinstance(device, dict):
            continue
        resource = _either(device, "resource_name", "resourceName")
        is_mig = isinstance(resource, str) and resource.startswith("nvidia.com/mig-")
        if resource in GPU_RESOURCES or is_mig:
            found = _either(device, "device_ids", "deviceIds")
            if isinstance(found, list):
                ids.extend(d for d in found if isinstance(d, str))
    return ids


def _either(obj: dict[str, Any], snake: str, camel: str) -> Any:
    return obj.get(snake) if snake in obj else obj.get(camel)


# ---------------------------------------------------------------------------------------------
_INVALID = object()  # marks a segment that did not decode


def _json_values(text: str) -> Iterator[tuple[Any, str, int]]:
    """``(value, raw text, line number)`` for each JSON value: one document, JSON lines, or
    pretty-printed values one after another. Undecodable stretches come back as ``_INVALID``,
    resynchronising at the next line that starts with ``{``."""
    try:
        yield orjson.loads(text), text, 1
        return
    except orjson.JSONDecodeError:
        pass
    lines = text.splitlines()
    first = next((line for line in lines if line.strip()), None)
    if first is not None and _decodes(first):
        for number, line in enumerate(lines, start=1):
            if line.strip():
                yield _loads(line), line, number
        return
    yield from _concatenated(text)


def _concatenated(text: str) -> Iterator[tuple[Any, str, int]]:
    pos, counted, line = 0, 0, 1
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return
        line += text.count("\n", counted, pos)
        counted = pos
        try:
            value, end = _DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError):
            end = text.find("\n{", pos)
            end = len(text) if end < 0 else end + 1
            yield _INVALID, text[pos:end], line
        else:
            yield value, text[pos:end], line
        pos = end


def _decodes(line: str) -> bool:
    return _loads(line) is not _INVALID


def _loads(line: str) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return _INVALID


def _shape(value: Any) -> str | None:
    if not isinstance(value, dict):
        return None
    if value.get("kind") in ("PodList", "NodeList", "List", *LIST_KINDS) and isinstance(value.get("items"), list):
        return "list"
    if is_dra_object(value):
        return "dra"
    if isinstance(value.get("type"), str) and value["type"] in WATCH_TYPES and "object" in value:
        return "watch"
    if _is_pod(value) and isinstance(value.get("metadata"), dict):
        return "pod"
    return None


def _dra_items(value: dict[str, Any]) -> list[dict[str, Any]]:
    """The claims and slices of a list; items of a typed list (the API's) carry no kind."""
    kind = str(value["kind"]).removesuffix("List") if value["kind"] in LIST_KINDS else None
    items = [{**item, "kind": kind} if kind and isinstance(item, dict) else item for item in value["items"]]
    return [item for item in items if is_dra_object(item)]


def _add_node(
    result: ParseResult, node: dict[str, Any], cluster: str, observed_at: datetime | None, where: str | None
) -> None:
    try:
        obj = node_state(node, cluster=cluster, observed_at=observed_at)
    except (ValueError, TypeError) as exc:
        result.reject(topic=TOPIC.name, source=SOURCE, reason=str(exc), raw=raw_text(node), origin=where)
        return
    if obj is not None:
        add_record_events(result, [obj], topic=TOPIC.name, source=SOURCE, raw=raw_text(node), origin=where)


def _is_pod(item: Any) -> bool:
    return isinstance(item, dict) and item.get("kind", "Pod") == "Pod" and "spec" in item


def _creation(pod: dict[str, Any]) -> tuple[datetime, str]:
    meta = as_dict(pod.get("metadata"))
    try:
        created = optional_time(meta.get("creationTimestamp")) or _LAST
    except ValueError:
        created = _LAST
    return created, str(meta.get("name"))


__all__ = ["PodTracker", "merge_pod_resources", "parse", "parse_files", "parse_pod_resources"]
