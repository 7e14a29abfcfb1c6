"""Which pod labels name the team and the model (pure, but for reading the settings).

The attribution reads a pod's team and model from its labels ``team`` and ``model``. Real clusters
name them otherwise (``app.kubernetes.io/part-of``, ``cost-center``), so the keys are configurable:
``GPULEDGER_TEAM_LABEL_KEYS`` and ``GPULEDGER_MODEL_LABEL_KEYS`` (comma-separated, the first present
wins). The Kubernetes parser sets the pod's ``team`` and ``model`` labels from them when it reads
the pod (and drops them when no configured key is present), so they hold for every event parsed
from then on; events already published keep the owner they carried.
"""

from __future__ import annotations

OwnerKeys = tuple[tuple[str, ...], tuple[str, ...]]  # (team label keys, model label keys)


def configured_owner_keys() -> OwnerKeys:
    from pipelines.settings import get_settings

    settings = get_settings()
    return settings.team_label_key_list, settings.model_label_key_list


def owner_labels(labels: dict[str, str], keys: OwnerKeys) -> dict[str, str]:
    """``labels`` with ``team`` and ``model`` taken from the first of their configured keys present."""
    out = dict(labels)
    for name, names in zip(("team", "model"), keys, strict=True):
        value = next((labels[k] for k in names if labels.get(k)), None)
        if value is None:
            out.pop(name, None)
        else:
            out[name] = value
    return out
