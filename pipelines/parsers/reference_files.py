"""The shapes of one version of an org mapping file and of a pricing file, as pydantic models.

What a version may hold is declared here once; :mod:`pipelines.parsers.reference` reads the YAML,
splits it into versions and turns each into its event. A version that does not fit is a dead
letter whose reason names the file, the version (its position in the file, from 1, and its date
when that could be read) and the field::

    pricing.yaml, version 2 (effective 2026-09-01): gpu_hourly.H100: must be at least 0
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from pipelines.events import NonNegative, PricingData
from pipelines.times import as_utc, day_start, parse_iso


def effective_from(value: Any) -> datetime:
    """A YAML date (midnight UTC), datetime (naive = UTC) or ISO string."""
    if isinstance(value, datetime):
        return as_utc(value)
    if isinstance(value, date):
        return day_start(value)
    if isinstance(value, str) and value.strip():
        return parse_iso(value)
    raise ValueError(f"must be a date or timestamp, got {str(value)[:40]!r}")


def _name(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int) or not str(value).strip():
        raise ValueError(f"must hold non-empty names, got {str(value)[:40]!r}")
    return str(value).strip()


def _names(value: Any) -> Any:
    if value is None:
        return []
    if isinstance(value, str | int) and not isinstance(value, bool):
        return [value]
    if not isinstance(value, list):
        raise ValueError("must be a list of names")
    return value


def _mapping(value: Any) -> Any:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("must be a mapping")
    return value


Name = Annotated[str, BeforeValidator(_name)]
Names = Annotated[list[Name], BeforeValidator(_names)]
Moment = Annotated[datetime, BeforeValidator(effective_from)]


class OrgVersion(BaseModel):
    """One org version: business unit → its teams, namespace → team, Slurm account → team."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    effective_from: Moment
    description: str | None = None

    business_units: Annotated[dict[Name, Names], BeforeValidator(_mapping)] = Field(default_factory=dict)
    namespaces: Annotated[dict[Name, Name], BeforeValidator(_mapping)] = Field(default_factory=dict)
    accounts: Annotated[dict[Name, Name], BeforeValidator(_mapping)] = Field(default_factory=dict)


def _rates(value: Any) -> Any:
    value = _mapping(value)
    if not value:
        raise ValueError("must name at least one GPU model")
    return {str(model): rate for model, rate in value.items()}


class PricingVersion(PricingData):
    """One price book version: the fields of the ``pricing.rates`` event, with a file's looser
    date forms, GPU model names that YAML read as numbers, and a ``description``."""

    effective_from: Moment  # a date or naive time is read as UTC here
    gpu_hourly: Annotated[dict[str, NonNegative], BeforeValidator(_rates)]
    description: str | None = None


_PLAIN = {
    "extra_forbidden": "unknown key",
    "missing": "required",
    "greater_than_equal": "must be at least {ge:g}",
}


def version_error(exc: ValidationError, origin: str | None, position: int, version: Any) -> str:
    """One line: where (file, version, field) and what is wrong with the first error."""
    first = exc.errors(include_url=False)[0]
    field = ".".join(str(part) for part in first["loc"]) or "version"
    template = _PLAIN.get(first["type"])
    what = template.format(**(first.get("ctx") or {})) if template else first["msg"].removeprefix("Value error, ")
    more = len(exc.errors()) - 1
    return f"{where(origin, position, version)}: {field}: {what}" + (f" (and {more} more)" if more else "")


def where(origin: str | None, position: int, version: Any) -> str:
    """``<file>, version <n> (effective <date>)``: the date only when the version states a readable one."""
    text = f"{origin or 'input'}, version {position}"
    try:
        moment = effective_from(version.get("effective_from")) if isinstance(version, dict) else None
    except ValueError:
        moment = None
    if moment is None:
        return text
    shown = moment.date().isoformat() if moment.time() == datetime.min.time() else moment.isoformat()
    return f"{text} (effective {shown})"
