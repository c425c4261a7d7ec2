"""The provenance and guarantee of a release (:class:`ReleaseMetadata`), written to its manifest.

Below :mod:`dpcube.release.base` (which re-exports it), so that the bootstrap
(:mod:`dpcube.release.uncertainty`, :mod:`dpcube.release.replicates`), which the release's own
methods call, reads it without importing the release class.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


def _library_version() -> str:
    from dpcube.version import __version__

    return __version__


@dataclass
class ReleaseMetadata:
    """Provenance and guarantee of a release; written to the manifest."""

    mechanism: str
    params: dict[str, Any]
    epsilon: float
    delta: float | None
    neighbour: str
    #: What one neighbouring step adds or removes: ``"row"``, or the unit column and its bounds
    #: (``{"column": "tailnum", "max_rows_per_unit": 50}``; :mod:`dpcube.privacy.unit`).
    privacy_unit: str | dict[str, Any] = "row"
    sensitivity: dict[str, float] = field(default_factory=dict)
    noise: dict[str, Any] = field(default_factory=dict)
    seeded: bool = False
    noiseless: bool = False
    #: Whether the release was charged to a budget ledger (False: ``account=False``, or seeded).
    accounted: bool = True
    #: Exact figures of the data the mechanism treats as public, each declared by someone:
    #: ``{"figure", "value", "declared_by", "how"}`` (e.g. the census number of groups G,
    #: declared by the curator with ``--public-groups``). Nothing else exact is released.
    declared_public: list[dict[str, Any]] = field(default_factory=list)
    release_id: str = field(default_factory=lambda: os.urandom(16).hex())
    created: str = field(
        default_factory=lambda: _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    )
    library_version: str = field(default_factory=_library_version)
    #: Notes on the guarantee (privacy unit, warnings); never a figure computed from the data
    #: (those go to :attr:`Release.curator_log`, which is not saved).
    report: dict[str, Any] = field(default_factory=dict)

    @property
    def for_publication(self) -> bool:
        """False when the noise was seeded (reproducible) or switched off, or nothing was charged."""
        return not (self.seeded or self.noiseless) and self.accounted

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["for_publication"] = self.for_publication
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ReleaseMetadata:
        fields = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        return cls(**fields)


__all__ = ["ReleaseMetadata"]
