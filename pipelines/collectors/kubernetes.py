"""Live Kubernetes pods → allocation events (topic ``scheduler.allocations``) by list + watch.

The usual informer loop, with the ``kubernetes`` client:

1. **list** all pods (paged with ``limit``/``continue``), feed them to a
   :class:`~pipelines.parsers.kubernetes_tracker.PodTracker` in ``creationTimestamp`` order and
   keep the list's ``resourceVersion``;
2. **watch** from that ``resourceVersion`` with ``allowWatchBookmarks=true`` for at most
   ``watch_timeout_s`` per poll, feeding every event to the tracker and moving the
   ``resourceVersion`` forward with every event, BOOKMARKs included. The watch request goes
   through the client's ``list_…(watch=True, _preload_content=False)`` and the events are read
   as sent; ``kubernetes.watch.Watch`` is not used: in client 37 its ``deserialize=False`` mode
   fails on ``ERROR`` events (``KeyError: 'raw_object'``) and its default mode validates every pod
   against strict models, so one field the models do not expect would stop the stream;
3. on **410 Gone** (an expired ``resourceVersion``: an ``ERROR`` event or an HTTP 410) go back to
   1. A GPU pod that was known before and is missing from the new list was deleted while nobody
   watched: it is fed to the tracker as deleted, observed at the last time it was known to exist
   (the last successful poll).

Nodes: every poll also lists the nodes (``list_node``) and passes on a node's state (NotReady ->
down, cordoned -> drained, up, with its physical GPU count: :mod:`pipelines.parsers.kubernetes_nodes`)
when it differs from the last one passed on. A service account that may not list nodes gets a
warning, and pods are still collected.

With a ``state_file`` the known GPU pods, the time of the last successful poll, the attempts
used per pod group and the event ids already published for each pod survive a restart (saved
after each published batch, :mod:`pipelines.collectors.state`): the first list of a restarted
collector ends the pods deleted while it was down at the last time they were seen, a pod
re-created under the same name while it was down continues its predecessor's attempt numbers,
and the pods still there publish only what is new about them.

The tracker emits each id once per pod, so a re-list does not repeat events. Observation times
(the end of a pod deleted without a timestamp) are the collector's clock when the event arrived.
Events already received when the connection breaks are still handed on (the resourceVersion has
moved past them); a failure before any event is ``SourceUnavailable`` and the same watch is
retried at the next poll.

DRA (``dra``): every poll also lists the ResourceClaims and the GPU driver's ResourceSlices, so a pod
holding GPUs through claims gets their devices and its ``claims``, as in the file parser
(:mod:`pipelines.collectors.kubernetes_dra`: re-listed at every poll, not watched; listed again
within a poll for a pod whose claim it cannot resolve yet). A service account that may not list
them gets a warning, and such pods are dead letters saying which claim is unknown.

Which GPUs a pod holds: the kubelet's PodResources API, asked live over its gRPC socket
(``pod_resources_socket``) or read from a ``List()`` dump (``pod_resources``, a JSON file re-read
when it changes), else the pod annotation ``gpuledger.io/devices`` (see
:mod:`pipelines.parsers.kubernetes_pod`). The device source is read at every poll and again
before a placed GPU pod it does not name is fed to the tracker
(:mod:`pipelines.collectors.podresources.lookup`). When it cannot answer, the poll stops there
(``SourceUnavailable``, retried): a watch keeps what it already handed on and resumes at the event
that needed the devices, so no placement goes out without the ids the kubelet would have named.

Per node (``node_name``): only the pods bound to that node (``fieldSelector=spec.nodeName=…``) and
only that Node (``fieldSelector=metadata.name=…``), as a DaemonSet runs it beside each kubelet. The
instances of all nodes together publish what one cluster-wide collector publishes, each event once,
except the pending events of pods never bound to any node (no node's collector sees them).

Tested against a real kube-apiserver v1.37.2 on etcd 3.7.0 with the chart's RBAC
(tests/integration/test_kubernetes_real.py: transitions, a deletion while down, 410 Gone after
compaction, bookmarks, continue tokens, NotReady and cordoned nodes).

The API object is injected (``api``): anything with ``list_pod_for_all_namespaces`` /
``list_namespaced_pod`` of ``kubernetes.client.CoreV1Api``. :func:`core_api` builds the real one
from a kubeconfig or the in-cluster service account.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
from urllib3.exceptions import HTTPError

from pipelines.collectors.base import Batch
from pipelines.collectors.kubernetes_dra import ClaimLister, custom_objects
from pipelines.collectors.kubernetes_nodes import NodeStates
from pipelines.collectors.podresources import DeviceSource, PodResourcesFile
from pipelines.collectors.podresources.lookup import DeviceLookup
from pipelines.collectors.state import StateFile
from pipelines.errors import SourceUnavailable
from pipelines.parsers.base import ParseResult
from pipelines.parsers.kubernetes_tracker import SOURCE, PodTracker
from pipelines.parsers.sched_events import RECORD_ERRORS
from pipelines.times import from_epoch, parse_iso

GONE = 410


def core_api(*, kubeconfig: str | None = None, context: str | None = None, in_cluster: bool | None = None) -> Any:
    """A ``CoreV1Api`` from the in-cluster service account (when running in a pod and no
    kubeconfig is named, or when ``in_cluster``) or else from the kubeconfig."""
    from kubernetes import client, config

    use_cluster = (
        in_cluster
        if in_cluster is not None
        else (bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and not kubeconfig and not context)
    )
    try:
        if use_cluster:
            configuration = client.Configuration()
            config.load_incluster_config(client_configuration=configuration)
            api_client = client.ApiClient(configuration)
        else:
            api_client = config.new_client_from_config(config_file=kubeconfig, context=context)
    except (config.ConfigException, OSError, ValueError, TypeError) as exc:
        where = (
            "the in-cluster service account"
            if use_cluster
            else (kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config")
        )
        raise SourceUnavailable(f"no usable Kubernetes credentials in {where}: {_one_line(exc)}") from None
    return client.CoreV1Api(api_client)


class PodWatcher:
    """A collector listing and watching pods (see the module docstring)."""

    source = SOURCE

    def __init__(
        self,
        api: Any,
        *,
        cluster: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        watch_timeout_s: int = 30,
        page_size: int = 500,
        replicas: int | None = None,
        workload_kind: str | None = None,
        pod_resources: Path | None = None,
        clock: Callable[[], float] = time.time,
        state_file: Path | None = None,
        nodes: bool = False,
        node_name: str | None = None,
        pod_resources_socket: Path | None = None,
        dra: bool = False,
        dra_api: Any = None,
    ) -> None:
        if watch_timeout_s < 1:
            raise ValueError("watch_timeout_s must be at least 1 second")
        if pod_resources is not None and pod_resources_socket is not None:
            raise ValueError("give either a PodResources file or the kubelet's PodResources socket, not both")
        if node_name is not None and not node_name.strip():
            raise ValueError("the node name is empty")
        self.api = api
        self.tracker = PodTracker(cluster=cluster, replicas=replicas, workload_kind=workload_kind)
        self.namespace = namespace
        self.label_selector = label_selector
        self.watch_timeout_s = int(watch_timeout_s)
        self.page_size = page_size
        self.node_name = node_name
        self.resource_version: str | None = None
        self._clock = clock
        self._known: dict[str, dict[str, Any]] = {}  # "<ns>/<name>" -> last object of each GPU pod
        self.devices = _device_lookup(
            pod_resources,
            pod_resources_socket,
            self.tracker,
            node_name,
            followed=lambda: {tuple(key.split("/", 1)) for key in self._known},
        )
        self._confirmed: datetime | None = None  # the last successful poll: known pods existed then
        self._claim_warnings: list[str] = []  # of claims listed again within this poll
        self.nodes = NodeStates(cluster, node=node_name) if nodes else None
        # dra_api: anything with list_cluster_custom_object (default: the client's, over api's connection)
        self.claims = (
            ClaimLister(
                dra_api if dra_api is not None else custom_objects(api),
                self.tracker,
                namespace=namespace,
                node=node_name,
                page_size=page_size,
            )
            if dra
            else None
        )
        self._state = StateFile(state_file)
        saved = self._state.load()
        if saved:
            self._known.update(saved.get("known") or {})
            self.tracker.import_state(saved.get("tracker") or {})
            if self.nodes is not None:
                self.nodes.passed_on.update(saved.get("node_states") or {})
            if saved.get("confirmed_at"):
                self._confirmed = parse_iso(saved["confirmed_at"])
            if self.devices is not None:
                self.devices.import_state(saved.get("devices"))

    # --------------------------------------------------------------------------------------
    def poll(self) -> Batch:
        if self.devices is not None:
            self.devices.refresh()
        warnings = self.claims.refresh() if self.claims is not None else []
        batch = self._relist() if self.resource_version is None else self._watch()
        batch.warnings[:0] = warnings + self._claim_warnings
        self._claim_warnings = []
        no_gpu = self.tracker.no_gpu_note()
        if no_gpu:  # said per poll: the set would otherwise grow with every pod the cluster ever ran
            batch.result.note(no_gpu)
            self.tracker.without_gpu.clear()
        self._confirmed = self._now()
        if self.nodes is not None:
            self.nodes.poll(self.api, self._confirmed, batch)
        saved = {
            "known": dict(self._known),
            "tracker": self.tracker.export_state(),
            "confirmed_at": self._confirmed.isoformat(),
            "node_states": dict(self.nodes.passed_on) if self.nodes else {},
            "devices": self.devices.export_state() if self.devices else [],
        }
        batch.commit = lambda: self._state.save(saved)
        return batch

    def _list_call(self) -> Callable[..., Any]:
        if self.namespace:
            return functools.partial(self.api.list_namespaced_pod, self.namespace)
        result: Callable[..., Any] = self.api.list_pod_for_all_namespaces
        return result

    def _selector(self) -> dict[str, Any]:
        selector: dict[str, Any] = {"label_selector": self.label_selector} if self.label_selector else {}
        if self.node_name:
            selector["field_selector"] = f"spec.nodeName={self.node_name}"
        return selector

    # --------------------------------------------------------------------------------------
    def _relist(self) -> Batch:
        items, version = self._list_all()
        if self.devices is not None:  # before anything changes: a failed read leaves the next poll to re-list
            received = self.devices.received()
            for pod in items:
                self.devices.ensure(pod, received)
        observed = self._now()
        result = ParseResult()
        present = {_key(pod): _meta(pod).get("uid") for pod in items}
        gone_at = self._confirmed or observed  # deleted while nobody watched: last known to exist then
        # a pod of a known name with another uid is a re-created pod: its predecessor is gone too
        for key in [k for k, p in self._known.items() if present.get(k, "\0") != _meta(p).get("uid")]:
            result.extend(self.tracker.observe(self._known.pop(key), deleted=True, observed_at=gone_at))
        for pod in sorted(items, key=_creation_order):
            self._ensure_claims(pod)
            self._remember(pod, deleted=False)
            result.extend(self.tracker.observe(pod, observed_at=observed, origin="list"))
        self.resource_version = version
        note = f"listed {len(items)} pods at resourceVersion {version}"
        if version is None:  # nothing to watch from: list again at the next interval
            return Batch(result, note=note, warnings=["the pod list carried no resourceVersion"])
        # more: start watching right away (a run limited to one poll stops after the list)
        return Batch(result, more=True, note=note)

    def _list_all(self) -> tuple[list[dict[str, Any]], str | None]:
        from kubernetes.client.exceptions import ApiException

        call = self._list_call()
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {
                "limit": self.page_size,
                "_preload_content": False,
                "_request_timeout": 60,
                **self._selector(),
            }
            if token:
                kwargs["_continue"] = token
            try:
                response = call(**kwargs)
                doc = orjson.loads(response.data)
            except ApiException as exc:
                raise SourceUnavailable(f"listing pods failed: HTTP {exc.status} {exc.reason}") from None
            except orjson.JSONDecodeError:
                raise SourceUnavailable("listing pods: the API server did not answer with JSON") from None
            except (HTTPError, OSError) as exc:  # the server is unreachable
                raise SourceUnavailable(f"Kubernetes API unreachable: {_one_line(exc)}") from None
            meta = doc.get("metadata") if isinstance(doc, dict) else None
            meta = meta if isinstance(meta, dict) else {}
            items.extend(i for i in (doc.get("items") or []) if isinstance(i, dict))
            token = meta.get("continue") or None
            if not token:
                return items, meta.get("resourceVersion") or None

    # --------------------------------------------------------------------------------------
    def _watch(self) -> Batch:
        from kubernetes.client.exceptions import ApiException

        start_version = self.resource_version
        result = ParseResult()
        received = 0
        try:
            response = self._list_call()(
                watch=True,
                resource_version=start_version,
                allow_watch_bookmarks=True,
                timeout_seconds=self.watch_timeout_s,
                _preload_content=False,
                _request_timeout=self.watch_timeout_s + 30,
                **self._selector(),
            )
            try:
                for event in _events(response):
                    if event.get("type") == "ERROR":
                        raise _error_status(event.get("object"))
                    self._apply(event, result)
                    received += 1
            finally:  # close first: a stream left half-read must not go back to the pool
                response.close()
                response.release_conn()
        except ApiException as exc:
            if exc.status == GONE:
                self.resource_version = None  # expired: the next poll re-lists
                return Batch(result, more=True, note=f"resourceVersion {start_version} expired: re-listing")
            return self._broken(result, received, f"watch failed: HTTP {exc.status} {exc.reason}")
        except (HTTPError, OSError, ValueError) as exc:  # the connection or the stream broke
            return self._broken(result, received, f"watch broke: {_one_line(exc)}")
        except SourceUnavailable as exc:  # the device source, for the event not applied: it comes again
            if received == 0:
                raise
            return Batch(result, warnings=[str(exc)], note=f"{received} events, then the device ids failed")
        return Batch(result, more=True, note=f"watched from resourceVersion {start_version}: {received} events")

    def _broken(self, result: ParseResult, received: int, why: str) -> Batch:
        if received == 0:
            raise SourceUnavailable(f"Kubernetes API: {why}")
        return Batch(result, warnings=[why], note=f"{received} events before the watch broke")

    def _apply(self, event: Any, result: ParseResult) -> None:
        if not isinstance(event, dict):
            result.extend(self.tracker.feed(event))  # dead-letters it
            return
        obj = event.get("object")
        if self.devices is not None and event.get("type") in ("ADDED", "MODIFIED"):
            self.devices.ensure(obj, self.devices.received())  # may raise: the event stays unapplied
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if isinstance(meta, dict) and meta.get("resourceVersion"):
            self.resource_version = str(meta["resourceVersion"])
        if event.get("type") in ("ADDED", "MODIFIED", "DELETED") and isinstance(obj, dict):
            self._ensure_claims(obj)
            self._remember(obj, deleted=event.get("type") == "DELETED")
        result.extend(self.tracker.feed(event, observed_at=self._now(), origin="watch"))

    def _remember(self, pod: dict[str, Any], *, deleted: bool) -> None:
        """Keep the last object of GPU pods, to close them if they vanish between a watch and a
        re-list."""
        key = _key(pod)
        if deleted:
            self._known.pop(key, None)
            return
        try:
            holds_gpu = self.tracker.read(pod) is not None
        except RECORD_ERRORS:
            holds_gpu = False
        if holds_gpu:
            self._known[key] = pod

    def _ensure_claims(self, pod: dict[str, Any]) -> None:
        if self.claims is not None:
            self._claim_warnings += self.claims.ensure(pod)

    def _now(self) -> datetime:
        return from_epoch(self._clock())

    def close(self) -> None:
        if self.devices is not None:
            self.devices.close()
        api_client = getattr(self.api, "api_client", None)
        close = getattr(api_client, "close", None)
        if callable(close):
            close()


def _device_lookup(
    file: Path | None, socket: Path | None, tracker: PodTracker, node: str | None, followed: Callable[[], Any]
) -> DeviceLookup | None:
    source: DeviceSource
    if socket is not None:
        from pipelines.collectors.podresources.client import PodResourcesSocket  # grpcio: the collect extra

        source = PodResourcesSocket(socket)
    elif file is not None:
        source = PodResourcesFile(file)
    else:
        return None
    return DeviceLookup(source, tracker, node=node, followed=followed)


def _meta(pod: dict[str, Any]) -> dict[str, Any]:
    meta = pod.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _key(pod: dict[str, Any]) -> str:
    meta = _meta(pod)
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def _creation_order(pod: dict[str, Any]) -> tuple[str, str]:
    """Creation order: RFC 3339 UTC timestamps as the API writes them sort as text."""
    meta = _meta(pod)
    return str(meta.get("creationTimestamp") or "~"), str(meta.get("name"))


def _events(response: Any) -> Iterator[dict[str, Any]]:
    """Watch events of a streamed response, one JSON object per line, as they arrive."""
    pending = b""
    for chunk in response.stream(amt=None, decode_content=True):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line.strip():
                event = orjson.loads(line)  # a JSONDecodeError is a ValueError: the stream broke
                if not isinstance(event, dict):
                    raise ValueError("watch event is not an object")
                yield event


def _error_status(status: Any) -> Exception:
    """The ApiException an ERROR watch event stands for (410 Gone: the resourceVersion expired)."""
    from kubernetes.client.exceptions import ApiException

    status = status if isinstance(status, dict) else {}
    code = status.get("code")
    return ApiException(
        status=code if isinstance(code, int) else 500, reason=f"{status.get('reason')}: {status.get('message')}"
    )


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]
