"""Short GPU model keys, as pricing files name them, from dcgm-exporter's ``modelName``."""

from __future__ import annotations

import re

_FAMILY = re.compile(
    r"\b(GB200|GH200|B200|B100|H200|H100|H800|H20|A100|A800|A40|A30|A10G|A10|L40S|L40|L4|V100|T4)\b", re.IGNORECASE
)


def model_key(model_name: str | None) -> str:
    """``NVIDIA H100 80GB HBM3`` → ``H100``; unknown names lose their vendor prefix; None → ``unknown``."""
    if not model_name or not model_name.strip():
        return "unknown"
    match = _FAMILY.search(model_name)
    if match:
        return match.group(1).upper()
    name = model_name.strip()
    return name[7:] if name.upper().startswith("NVIDIA ") else name
