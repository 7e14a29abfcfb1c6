"""Nodes, GPUs and the schedulable slots on them.

* ``N`` nodes ``gpu001 …``; the first ``ceil(N/2)`` are Kubernetes nodes, the rest Slurm nodes.
  GPU models cycle H100, A100, H200 by node index.
* Kubernetes nodes: GPUs 0–5 whole; GPU 6 MIG-partitioned (``3g + 2g + 1g + 1g`` on even
  Kubernetes nodes, ``3g + 2g + 1g`` with one slice left unused on odd ones); GPU 7 time-sliced
  with 4 replicas (``nvidia.com/gpu.shared`` or plain ``nvidia.com/gpu``, see
  ``writers/k8s_objects.py``). Slurm nodes: 8 whole GPUs.
* dcgm-exporter flavour per node: the host label is ``hostname`` on odd node indices (newer
  exporters) and ``Hostname`` otherwise; ``DCGM_FI_PROF_*`` is absent on every fourth Slurm node
  (and on the only one when there is one), so ``DCGM_FI_DEV_GPU_UTIL`` is the fallback there.

With ``modern_sharing`` some Kubernetes nodes share all their GPUs by time-slicing or MPS (layout
``shared``, 10 or 2 replicas) or hand them out through DRA claims (GPUs 0–5 whole, GPU 6 MIG as above, GPU 7 with layout
``claim``: ``CLAIM_SEATS`` seats, the GPU split equally among the seats held); see
:mod:`pipelines.simulator.sharing`.

A **slot** is what one allocation takes: a whole GPU, one MIG instance or one shared replica. Its
``weight`` is its GPU fraction in 1/28 units; its ``series`` is the dcgm-exporter entity whose
utilisation it sees (the GPU, or the MIG instance).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import numpy as np

from pipelines.simulator import sharing
from pipelines.simulator.config import GPU_MODELS, MODEL_CYCLE, SHARED_REPLICAS, UNIT, GpuModel, SimConfig

PCI_BUSES = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")
MIG_LAYOUT_FULL = (3, 2, 1, 1)
MIG_LAYOUT_PARTIAL = (3, 2, 1)
MIG_GI_IDS = {3: [1, 2], 2: [5, 6, 3, 4], 1: [13, 14, 11, 12, 7, 8, 9, 10]}


@dataclass(frozen=True)
class MigInstance:
    gi: int  # GPU_I_ID
    slices: int
    profile: str


@dataclass(frozen=True)
class Gpu:
    node: str
    index: int
    uuid: str
    pci_bus_id: str
    layout: str  # "whole" | "mig" | "shared" | "claim"
    mig: tuple[MigInstance, ...] = ()
    replicas: int = 0
    gres: str = ""  # Slurm typed GRES name of the model ("h100")


@dataclass(frozen=True)
class Slot:
    gpu: Gpu
    kind: str  # "gpu" | "mig" | "shared" | "claim"
    weight: int  # GPU fraction in 1/UNIT (a claim seat: the whole GPU, split among the seats held)
    key: str  # unique slot id
    series: str  # dcgm entity: GPU uuid or "<uuid>/mig<gi>"
    device_id: str  # `gpuledger.io/devices` form
    mig: MigInstance | None = None
    replica: int | None = None


@dataclass(frozen=True)
class Node:
    name: str
    index: int
    scheduler: str  # "kubernetes" | "slurm"
    model: GpuModel
    host_label: str  # "Hostname" | "hostname"
    has_prof: bool
    ip: str
    gpus: tuple[Gpu, ...]
    slots: tuple[Slot, ...] = field(default=())
    sharing: str = ""  # modern_sharing role: "time-slicing" | "mps" | "dra" | ""
    exporter_pod: str | None = None  # dcgm-exporter without NODE_NAME: its pod name is its Hostname


@dataclass(frozen=True)
class Cluster:
    nodes: tuple[Node, ...]
    degraded_node: str | None  # the node that makes NCCL acceptance runs slow
    modern: bool = False  # SimConfig.modern_sharing
    by_name: dict[str, Node] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        self.by_name.update({n.name: n for n in self.nodes})

    def node(self, name: str) -> Node:
        return self.by_name[name]

    def by_scheduler(self, scheduler: str) -> list[Node]:
        return [n for n in self.nodes if n.scheduler == scheduler]

    def all_slots(self) -> list[Slot]:
        return [s for n in self.nodes for s in n.slots]

    def all_gpus(self) -> list[Gpu]:
        return [g for n in self.nodes for g in n.gpus]


def _uuid(rng: np.random.Generator) -> str:
    return str(uuid.UUID(bytes=rng.bytes(16), version=4))


def _slots(gpu: Gpu) -> list[Slot]:
    if gpu.layout == "whole":
        return [Slot(gpu, "gpu", UNIT, gpu.uuid, gpu.uuid, gpu.uuid)]
    if gpu.layout == "mig":
        return [
            Slot(
                gpu,
                "mig",
                UNIT * m.slices // 7,
                f"{gpu.uuid}/mig{m.gi}",
                f"{gpu.uuid}/mig{m.gi}",
                f"MIG-{gpu.uuid}/{m.gi}",
                mig=m,
            )
            for m in gpu.mig
        ]
    if gpu.layout == "claim":
        return [
            Slot(gpu, "claim", UNIT, f"{gpu.uuid}#seat{r}", gpu.uuid, gpu.uuid, replica=r) for r in range(gpu.replicas)
        ]
    return [
        Slot(gpu, "shared", UNIT // gpu.replicas, f"{gpu.uuid}::{r}", gpu.uuid, f"{gpu.uuid}::{r}", replica=r)
        for r in range(gpu.replicas)
    ]


def _mig_instances(model: GpuModel, layout: tuple[int, ...]) -> tuple[MigInstance, ...]:
    used: dict[int, int] = {}
    out = []
    for slices in layout:
        gi = MIG_GI_IDS[slices][used.get(slices, 0)]
        used[slices] = used.get(slices, 0) + 1
        out.append(MigInstance(gi, slices, model.mig_profiles[slices]))
    return tuple(out)


def _gpus(
    name: str, model: GpuModel, kube_index: int | None, rng: np.random.Generator, role: str = ""
) -> tuple[Gpu, ...]:
    gpus = []
    for i in range(8):
        layout, replicas = "whole", 0
        mig: tuple[MigInstance, ...] = ()
        if role in sharing.REPLICAS:
            layout, replicas = "shared", sharing.REPLICAS[role]
        elif role == sharing.DRA and i == 7:
            layout, replicas = "claim", sharing.CLAIM_SEATS
        elif kube_index is not None and i == 6:
            layout = "mig"
            mig = _mig_instances(model, MIG_LAYOUT_FULL if kube_index % 2 == 0 else MIG_LAYOUT_PARTIAL)
        elif kube_index is not None and i == 7:
            layout, replicas = "shared", SHARED_REPLICAS
        gpus.append(
            Gpu(name, i, f"GPU-{_uuid(rng)}", f"00000000:{PCI_BUSES[i]}:00.0", layout, mig, replicas, model.gres)
        )
    return tuple(gpus)


def build_cluster(cfg: SimConfig, rng: np.random.Generator) -> Cluster:
    n_kube = (cfg.nodes + 1) // 2
    n_slurm = cfg.nodes - n_kube
    kube_names = [f"gpu{i + 1:03d}" for i in range(n_kube)]
    roles = sharing.roles(kube_names) if cfg.modern_sharing else {}
    blind = kube_names[0] if cfg.modern_sharing else None
    nodes = []
    for i in range(cfg.nodes):
        name = f"gpu{i + 1:03d}"
        model = GPU_MODELS[MODEL_CYCLE[i % len(MODEL_CYCLE)]]
        kube = i < n_kube
        slurm_index = i - n_kube
        has_prof = kube or not (slurm_index % 4 == 1 or n_slurm == 1)
        gpus = _gpus(name, model, i if kube else None, rng, roles.get(name, ""))
        slots = tuple(s for g in gpus for s in _slots(g))
        nodes.append(
            Node(
                name,
                i,
                "kubernetes" if kube else "slurm",
                model,
                "hostname" if i % 2 == 1 else "Hostname",
                has_prof,
                f"10.{20 if kube else 30}.{i // 250}.{i % 250 + 2}",
                gpus,
                slots,
                roles.get(name, ""),
                sharing.exporter_pod(name, cfg.seed) if name == blind else None,
            )
        )
    slurm_nodes = [n for n in nodes if n.scheduler == "slurm"]
    degraded = slurm_nodes[len(slurm_nodes) // 2].name if slurm_nodes else None
    return Cluster(tuple(nodes), degraded, cfg.modern_sharing)
