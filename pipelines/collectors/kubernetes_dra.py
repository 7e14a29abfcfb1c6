"""ResourceClaims and ResourceSlices for the Kubernetes collector: which GPUs DRA claims hold.

Each poll lists (paged) the ResourceClaims (of the collector's namespace, or all) and the GPU
driver's ResourceSlices (of the collector's node, when it has one) from ``resource.k8s.io/v1`` and
replaces the tracker's inventory with them (:mod:`pipelines.parsers.kubernetes_dra`). They are
re-listed at every poll, not watched: a claim is allocated before its pod is bound, so the list
taken at a poll's start names the claims of the pods that poll sees; a pod whose claim it does not
resolve (allocated in between) makes the lister list once more in that poll before the pod is read.

A list that fails (no RBAC for ``resource.k8s.io``, an API server without ``resource.k8s.io/v1``)
is a warning (once, until the reason changes or a list succeeds); the inventory of the last
successful list is kept, and a running pod whose claim is
unknown becomes a dead letter saying so, never a placement without its GPUs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import orjson
from urllib3.exceptions import HTTPError

from pipelines.parsers.kubernetes_dra import GPU_DRIVER
from pipelines.parsers.kubernetes_tracker import PodTracker
from pipelines.parsers.sched_events import RECORD_ERRORS

GROUP, VERSION = "resource.k8s.io", "v1"


def custom_objects(api: Any) -> Any:
    """The client's generic API over the same connection as ``api`` (a ``CoreV1Api``)."""
    from kubernetes import client

    return client.CustomObjectsApi(api.api_client)


class ClaimLister:
    def __init__(
        self,
        api: Any,
        tracker: PodTracker,
        *,
        namespace: str | None = None,
        node: str | None = None,
        page_size: int = 500,
    ) -> None:
        self.api = api  # anything with list_cluster_custom_object / list_namespaced_custom_object
        self.tracker = tracker
        self.namespace = namespace
        self.node = node
        self.page_size = page_size
        self.retried = False  # listed again in this poll for a pod it did not resolve
        self.failing: str | None = None  # why the last list failed (warned once until it changes)

    def refresh(self) -> list[str]:
        """List claims and slices into the tracker; the warnings (a failed list keeps the last one)."""
        self.retried = False
        return self._list()

    def ensure(self, pod: Any) -> list[str]:
        """Before ``pod`` is read: if it uses a claim the inventory cannot resolve, list again (once a poll)."""
        if self.retried or not isinstance(pod, dict) or not (pod.get("spec") or {}).get("resourceClaims"):
            return []
        try:
            self.tracker.read(pod)
            return []
        except RECORD_ERRORS:
            self.retried = True
            return self._list()

    def _list(self) -> list[str]:
        slices_selector = f"spec.driver={GPU_DRIVER}" + (f",spec.nodeName={self.node}" if self.node else "")
        try:
            claims = self._all("resourceclaims", namespaced=True)
            slices = self._all("resourceslices", namespaced=False, field_selector=slices_selector)
        except _ListFailed as exc:
            warning, self.failing = (
                None if str(exc) == self.failing else f"{exc} (DRA claims not refreshed)",
                str(exc),
            )
            return [warning] if warning else []
        self.failing = None
        return self.tracker.dra.replace(claims, slices)

    def _all(self, plural: str, *, namespaced: bool, **selector: str) -> list[dict[str, Any]]:
        from kubernetes.client.exceptions import ApiException

        call: Callable[..., Any] = functools.partial(self.api.list_cluster_custom_object, GROUP, VERSION, plural)
        if namespaced and self.namespace:
            call = functools.partial(self.api.list_namespaced_custom_object, GROUP, VERSION, self.namespace, plural)
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {
                "limit": self.page_size,
                "_preload_content": False,
                "_request_timeout": 60,
                **selector,
            }
            if token:
                kwargs["_continue"] = token
            try:
                doc = orjson.loads(call(**kwargs).data)
            except ApiException as exc:
                raise _ListFailed(f"listing {plural} failed: HTTP {exc.status} {exc.reason}") from None
            except (HTTPError, OSError, orjson.JSONDecodeError) as exc:
                raise _ListFailed(f"listing {plural} failed: {str(exc).splitlines()[0][:200]}") from None
            doc = doc if isinstance(doc, dict) else {}
            items += [i for i in (doc.get("items") or []) if isinstance(i, dict)]
            meta = doc.get("metadata")
            token = (meta.get("continue") if isinstance(meta, dict) else None) or None
            if not token:
                return items


class _ListFailed(Exception):
    """A list request that did not answer (turned into a warning)."""
