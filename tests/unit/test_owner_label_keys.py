"""Which pod labels name the team and the model: configurable, applied by the Kubernetes parser to
every pod it reads from then on (the attribution reads ``team`` and ``model``)."""

from __future__ import annotations

import pytest

from pipelines.events import AllocationEvent
from pipelines.parsers.kubernetes_labels import owner_labels
from pipelines.settings import reset_settings
from tests.unit.test_parse_kubernetes import parse_one, pod

LABELS = {"app.kubernetes.io/part-of": "vision", "team": "old-team", "cost-center": "cc-7", "app": "x"}


@pytest.mark.parametrize(
    ("team_keys", "model_keys", "team", "model"),
    [
        (("team",), ("model",), "old-team", None),  # the defaults: unchanged
        (("app.kubernetes.io/part-of", "team"), ("model",), "vision", None),  # the first present wins
        (("missing", "team"), ("cost-center",), "old-team", "cc-7"),
        (("app.kubernetes.io/name",), ("model",), None, None),  # no configured key: no team label
    ],
)
def test_the_first_configured_key_present_names_the_owner(
    team_keys: tuple[str, ...], model_keys: tuple[str, ...], team: str | None, model: str | None
) -> None:
    out = owner_labels(LABELS, (team_keys, model_keys))
    assert out.get("team") == team and out.get("model") == model
    assert out["app"] == "x" and out["cost-center"] == "cc-7"  # other labels stay


def test_the_parser_applies_the_settings_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPULEDGER_TEAM_LABEL_KEYS", "app.kubernetes.io/part-of, team")
    monkeypatch.setenv("GPULEDGER_MODEL_LABEL_KEYS", "gpuledger.io/model,model")
    reset_settings()
    try:
        labelled = pod(labels={**LABELS, "gpuledger.io/model": "llama-70b"})
        events = [e for e in parse_one({"kind": "PodList", "items": [labelled]}) if isinstance(e, AllocationEvent)]
        assert events
        assert {(e.data.owner.labels["team"], e.data.owner.labels["model"]) for e in events} == {
            ("vision", "llama-70b")
        }
    finally:
        monkeypatch.delenv("GPULEDGER_TEAM_LABEL_KEYS")
        monkeypatch.delenv("GPULEDGER_MODEL_LABEL_KEYS")
        reset_settings()
