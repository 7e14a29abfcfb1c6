"""Which clusters a question or a fact is about: a typed scope instead of sentinel strings.

Three kinds, and the only place their spellings are translated:

- **every cluster** — a report or API call without ``--cluster``/``cluster=`` (or with ``''``, or
  Grafana's "All", ``'*'``). The SQL queries take ``''`` for it (``{cluster:String} = '' OR …``).
- **this cluster** — one cluster by name.
- **every cluster's org** — an org version that applies to every cluster without one of its own.
  The warehouse stores it as :data:`ALL_CLUSTERS` (``'*'``); what it touches is every cluster,
  so its SQL value is ``''`` too.

A missing value (``None``) is not a fourth meaning: ``parse_cluster`` replaces it with the
caller's default (every cluster for the reports; the configured cluster where a page shows one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ALL_CLUSTERS = "*"  # the stored cluster of an org version for every cluster; Grafana's "All" value

Kind = Literal["every", "one", "org"]


@dataclass(frozen=True)
class ClusterScope:
    kind: Kind
    name: str = ""  # the cluster, for kind "one" only

    def __post_init__(self) -> None:
        if (self.kind == "one") != bool(self.name) or self.name == ALL_CLUSTERS:
            raise ValueError(f"a {self.kind!r} cluster scope with name {self.name!r}")

    @classmethod
    def every(cls) -> ClusterScope:
        return cls("every")

    @classmethod
    def one(cls, name: str) -> ClusterScope:
        return cls("one", name)

    @classmethod
    def org(cls) -> ClusterScope:
        return cls("org")

    @classmethod
    def from_stored(cls, value: str) -> ClusterScope:
        """A warehouse ``cluster`` value: ``'*'`` is an org version's every cluster, else one cluster."""
        return cls.org() if value == ALL_CLUSTERS else cls.one(value)

    def stored(self) -> str:
        """The warehouse's ``cluster`` value (the inverse of :meth:`from_stored`)."""
        if self.kind == "every":
            raise ValueError("'every cluster' is a question, not a stored value")
        return ALL_CLUSTERS if self.kind == "org" else self.name

    @property
    def sql_value(self) -> str:
        """What the queries take for ``{cluster:String}``: ``''`` for every cluster."""
        return self.name

    def sql_params(self) -> dict[str, str]:
        return {"cluster": self.sql_value}

    def includes(self, cluster: str) -> bool:
        """Whether a row of ``cluster`` is inside the scope."""
        return self.kind != "one" or cluster == self.name

    def name_or(self, default: str) -> str:
        """The one cluster's name; ``default`` where the scope is every cluster (a one-cluster page)."""
        return self.name if self.kind == "one" else default

    def __str__(self) -> str:
        return self.name if self.kind == "one" else f"({self.kind} cluster)"


EVERY_CLUSTER = ClusterScope.every()


def parse_cluster(text: str | None, default: ClusterScope = EVERY_CLUSTER) -> ClusterScope:
    """A ``--cluster``/``cluster=`` value: ``None`` → ``default``; ``''`` or ``'*'`` → every
    cluster; anything else → that cluster (a name that matches nothing is just an empty answer)."""
    if text is None:
        return default
    if text in ("", ALL_CLUSTERS):
        return EVERY_CLUSTER
    return ClusterScope.one(text)
