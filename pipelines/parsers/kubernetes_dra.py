"""Dynamic Resource Allocation: the GPUs a pod holds through ResourceClaims (pure).

Objects read (``resource.k8s.io/v1``, as ``kubectl get resourceclaims -A -o json`` and ``kubectl get
resourceslices -o json`` print them, or as the API lists them):

* ResourceSlice ``spec{driver, pool{name, generation}, nodeName, devices[]{name, attributes}}``: the
  devices a driver publishes per pool. NVIDIA's GPU driver (``gpu.nvidia.com``) names its pool after
  the node and its devices ``gpu-<minor>`` (attribute ``uuid`` = ``GPU-…``) and, for MIG instances,
  ``gpu-<minor>-mig-…`` (attributes ``uuid`` = ``MIG-…``, ``parentUUID``, ``profile``). Attributes are
  maps of one typed value (``{"uuid": {"string": "GPU-…"}}``); a name may carry the driver's domain
  (``gpu.nvidia.com/uuid``). Of two slices of one pool, the higher ``generation`` wins.
* ResourceClaim ``status.allocation.devices.results[]{request, driver, pool, device}``: the devices
  allocated to the claim; ``spec.devices.requests[]`` says what was asked while it is unallocated.
* Pods: ``spec.resourceClaims[]{name, resourceClaimName | resourceClaimTemplateName}``; a claim made
  from a template is named in ``status.resourceClaimStatuses[]{name, resourceClaimName}``.

A pod's claims whose allocated devices are the GPU driver's give its placement: ``claims`` =
``<namespace>/<claim>``, ``device_ids`` = ``GPU-<uuid>`` per whole GPU and ``MIG-<parent uuid>/<GPU
instance id>`` per MIG instance (the id as dcgm-exporter names it) when the slice publishes the GPU
instance id, ``gpus`` = whole GPUs (``kind "gpu"``) and MIG instances (``kind "mig"`` with their
profile). A device of another driver (a NIC) is not a GPU. Several pods may hold one claim (its
``reservedFor``): each names the same devices, and attribution splits them (docs/ATTRIBUTION.md).

What cannot be resolved is a ``ValueError`` (the pod becomes a dead letter with that reason, never
a silent zero): a placed pod's claim missing from the input or not allocated, a GPU device in no
ResourceSlice, a MIG device without a profile. A MIG instance whose GPU instance id is not published
is counted on its node without a device id, with a note.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipelines.parsers.base import json_list, json_object

GPU_DRIVER = "gpu.nvidia.com"
GPU_CLASSES = ("gpu.nvidia.com",)  # DeviceClasses whose requests are whole GPUs
CLAIM_KINDS = ("ResourceClaim",)  # tuples: a kind may be any JSON value
SLICE_KINDS = ("ResourceSlice",)
LIST_KINDS = ("ResourceClaimList", "ResourceSliceList")
GI_ATTRIBUTES = ("gpuInstanceId", "gpuInstanceID", "gi")
INPUT_HINT = (
    "claims and slices are read with the pods (`kubectl get resourceclaims -A -o json` and "
    "`kubectl get resourceslices -o json`; `collect kubernetes` lists them, given list on resource.k8s.io)"
)


@dataclass(frozen=True)
class Device:
    """One device of a ResourceSlice, as attribution names it."""

    uuid: str
    parent_uuid: str | None = None  # a MIG instance's GPU
    gpu_instance: int | None = None
    profile: str | None = None
    product: str | None = None


@dataclass
class Held:
    """What a pod holds through its claims."""

    claims: list[str] = field(default_factory=list)
    gpus: list[dict[str, Any]] = field(default_factory=list)
    device_ids: list[str] = field(default_factory=list)
    containers: set[str] = field(default_factory=set)  # containers using a GPU claim
    notes: list[str] = field(default_factory=list)


def is_dra_object(obj: Any) -> bool:
    return isinstance(obj, dict) and obj.get("kind") in CLAIM_KINDS + SLICE_KINDS


class DraInventory:
    """The ResourceClaims and ResourceSlices known; resolves a pod's claims to GPUs."""

    def __init__(self) -> None:
        self.claims: dict[str, dict[str, Any]] = {}  # "<namespace>/<name>" -> claim
        self.devices: dict[tuple[str, str, str], Device] = {}  # (driver, pool, device name)
        self._generations: dict[tuple[str, str], int] = {}
        # what each pod held when last resolved: a pod's template claim is deleted with it, and
        # its end still names the GPUs it held
        self._last: dict[str, Held] = {}

    def __bool__(self) -> bool:
        return bool(self.claims or self.devices)

    def add(self, obj: dict[str, Any]) -> None:
        """A ResourceClaim or ResourceSlice. Raises ValueError on a malformed one."""
        if obj.get("kind") in CLAIM_KINDS:
            meta = json_object(obj, "metadata")
            self.claims[f"{_str(meta, 'namespace')}/{_str(meta, 'name')}"] = obj
        else:
            self._add_slice(json_object(obj, "spec"))

    def replace(self, claims: list[dict[str, Any]], slices: list[dict[str, Any]]) -> list[str]:
        """Forget everything and read these (a fresh list); the reasons of those that were malformed."""
        self.claims.clear()
        self.devices.clear()
        self._generations.clear()
        errors = []
        for kind, objs in (("ResourceClaim", claims), ("ResourceSlice", slices)):
            for obj in objs:
                try:
                    self.add({**obj, "kind": kind})
                except (ValueError, TypeError) as exc:
                    errors.append(f"{kind}: {exc}")
        return errors

    def _add_slice(self, spec: dict[str, Any]) -> None:
        driver = _str(spec, "driver")
        pool = json_object(spec, "pool")
        name = _str(pool, "name")
        given = pool.get("generation")
        generation = given if isinstance(given, int) else 0
        known = self._generations.get((driver, name), generation)
        if generation < known:
            return  # an older generation of a pool already read
        if generation > known:  # the pool was republished: its older devices are gone
            self.devices = {key: d for key, d in self.devices.items() if key[:2] != (driver, name)}
        self._generations[(driver, name)] = generation
        for device in json_list(spec.get("devices")):
            attrs = _attributes(json_object(device, "attributes"), driver)
            uuid = attrs.get("uuid")
            if isinstance(uuid, str) and uuid:
                gi = next((attrs[a] for a in GI_ATTRIBUTES if isinstance(attrs.get(a), int)), None)
                self.devices[(driver, name, _str(device, "name"))] = Device(
                    uuid=uuid,
                    parent_uuid=_opt_str(attrs.get("parentUUID")),
                    gpu_instance=gi,
                    profile=_opt_str(attrs.get("profile")),
                    product=_opt_str(attrs.get("productName")),
                )

    # -------------------------------------------------------------------------------------------
    def held(
        self, namespace: str, spec: dict[str, Any], status: dict[str, Any], *, placed: bool, pod: str | None = None
    ) -> Held:
        """The GPUs the pod holds through its claims (``placed``: it runs on a node, so every claim
        must be allocated). Raises ValueError when a claim cannot be resolved, unless this ``pod``
        (its key) was resolved before: then what it held then."""
        try:
            held = self._resolve(namespace, spec, status, placed=placed)
        except ValueError:
            if pod is not None and pod in self._last:
                return self._last[pod]
            raise
        if pod is not None and held.claims:
            self._last[pod] = held
        return held

    def forget(self, pod: str) -> None:
        self._last.pop(pod, None)

    def _resolve(self, namespace: str, spec: dict[str, Any], status: dict[str, Any], *, placed: bool) -> Held:
        held = Held()
        users = _claim_users(spec)
        for pod_claim, key in pod_claim_keys(namespace, spec, status):
            claim = self.claims.get(key) if key else None
            if claim is None:
                if placed:
                    what = f"ResourceClaim {key}" if key else f"the ResourceClaim of pod claim {pod_claim!r}"
                    raise ValueError(f"{what} is not in the input: {INPUT_HINT}")
                continue
            allocation = json_object(json_object(claim, "status"), "allocation")
            if not allocation:
                if placed:
                    raise ValueError(f"ResourceClaim {key} of a running pod has no allocation")
                if self._requested(held, claim):
                    held.claims.append(str(key))
                    held.containers |= users.get(pod_claim, set())
                continue
            if self._allocated(held, str(key), allocation):
                held.claims.append(str(key))
                held.containers |= users.get(pod_claim, set())
        return held

    def _allocated(self, held: Held, key: str, allocation: dict[str, Any]) -> bool:
        whole: dict[str | None, int] = {}
        mig: dict[tuple[str, str | None], int] = {}
        for result in json_list(json_object(allocation, "devices").get("results")):
            driver, pool, name = _str(result, "driver"), _str(result, "pool"), _str(result, "device")
            if driver != GPU_DRIVER:
                continue  # not a GPU
            device = self.devices.get((driver, pool, name))
            if device is None:
                raise ValueError(
                    f"device {driver}/{pool}/{name} of ResourceClaim {key} is in no ResourceSlice: {INPUT_HINT}"
                )
            if device.parent_uuid is None:
                held.device_ids.append(device.uuid)
                whole[device.product] = whole.get(device.product, 0) + 1
                continue
            if not device.profile:
                raise ValueError(f"MIG device {pool}/{name} of ResourceClaim {key} has no profile attribute")
            mig[(device.profile, device.product)] = mig.get((device.profile, device.product), 0) + 1
            if device.gpu_instance is None:
                held.notes.append(
                    f"MIG device {pool}/{name} of ResourceClaim {key}: its ResourceSlice gives no "
                    "GPU instance id, so the instance is counted on its node without a device id"
                )
            else:
                held.device_ids.append(f"MIG-{device.parent_uuid}/{device.gpu_instance}")
        held.gpus += [_request("gpu", n, None, product) for product, n in whole.items()]
        held.gpus += [_request("mig", n, profile, product) for (profile, product), n in mig.items()]
        return bool(whole or mig)

    @staticmethod
    def _requested(held: Held, claim: dict[str, Any]) -> bool:
        """Whole GPUs asked by an unallocated claim (a pending pod's), exact counts of GPU classes."""
        count = 0
        for request in json_list(json_object(json_object(claim, "spec"), "devices").get("requests")):
            exactly = json_object(request, "exactly") or request  # v1 nests it; v1beta1 did not
            exact = exactly.get("allocationMode", "ExactCount") == "ExactCount"
            if exact and exactly.get("deviceClassName") in GPU_CLASSES:
                asked = exactly.get("count", 1)
                count += asked if isinstance(asked, int) and asked > 0 else 1
        if count:
            held.gpus.append(_request("gpu", count, None, None))
        return bool(count)


def pod_claim_keys(namespace: str, spec: dict[str, Any], status: dict[str, Any]) -> list[tuple[str, str | None]]:
    """``(pod claim name, "<namespace>/<ResourceClaim>")`` per entry of ``spec.resourceClaims``; the key
    is None for a template's claim not generated yet. A template's entry whose status names no claim
    (``resourceClaimName`` null: the pod needs none) is left out."""
    generated = {
        s.get("name"): s.get("resourceClaimName")
        for s in json_list(status.get("resourceClaimStatuses"))
        if isinstance(s, dict)
    }
    keys: list[tuple[str, str | None]] = []
    for entry in json_list(spec.get("resourceClaims")):
        name = _str(entry, "name")
        if not entry.get("resourceClaimName") and name in generated and not generated[name]:
            continue  # no claim needed
        claim = entry.get("resourceClaimName") or generated.get(name)
        keys.append((name, f"{namespace}/{claim}" if isinstance(claim, str) and claim else None))
    return keys


def _claim_users(spec: dict[str, Any]) -> dict[str, set[str]]:
    """Pod claim name -> the app containers using it (``resources.claims[].name``)."""
    users: dict[str, set[str]] = {}
    for container in json_list(spec.get("containers")):
        for used in json_list(json_object(container, "resources").get("claims")):
            if isinstance(used, dict) and isinstance(used.get("name"), str):
                users.setdefault(used["name"], set()).add(str(container.get("name")))
    return users


def _request(kind: str, count: int, profile: str | None, product: str | None) -> dict[str, Any]:
    return {"kind": kind, "count": count, "profile": profile, "replicas": None, "gpu_type": product}


def _attributes(attrs: dict[str, Any], driver: str) -> dict[str, Any]:
    """Attribute name (without the driver's domain) -> its one typed value."""
    out: dict[str, Any] = {}
    for name, value in attrs.items():
        short = name.removeprefix(f"{driver}/")
        if isinstance(value, dict) and len(value) == 1:
            out[short] = next(iter(value.values()))
    return out


def _str(obj: Any, key: str) -> str:
    value = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(value, str) or not value:
        raise ValueError(f"missing {key}")
    return value


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
