"""Bootstrap replicates stored with a release, so that a bootstrap answer costs no re-run.

A release whose error is a parametric bootstrap (:mod:`dpcube.release.uncertainty`: spatial trees,
census M_DP/M_CDP, non-linear data cubes) is answered with ``runs`` re-runs of its mechanism on
the bootstrap world built from the release itself. Those re-runs are post-processing of the
public release (no exact figure enters them and no budget is spent), so their released tables
may be saved next to the release's own: ``dpcube release --bootstrap-runs N`` does so, and a
query then reads them instead of re-running the mechanism ``N`` times per call.

On disk: for each table name ``t`` of the replicates that differs from the release's own table
``t``, one table ``bootstrap.t`` (the replicates' tables one after another, with a column
``_replicate`` = 0..runs-1) listed in the manifest's ``tables`` and verified by its SHA-256 like
any other; tables equal in every replicate to the release's own (a census release's region
hierarchy) are not repeated. The manifest's ``bootstrap`` entry records ``runs``, the ``seed``
of the replicates' generator, each replicate's small ``state`` and the names of the shared
tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from dpcube.errors import ReleaseError
from dpcube.release.columns import column_numpy
from dpcube.release.metadata import ReleaseMetadata

#: A :class:`dpcube.release.base.Release`: its methods call this module (:func:`~dpcube.release.
#: base.load_release` restores the stored replicates), so the class is not imported here; only the
#: methods :class:`~dpcube.release.base.Release` declares are called.
AnyRelease = Any

#: Prefix of the stored replicates' table names in a manifest.
PREFIX = "bootstrap."
#: The column that numbers the replicates inside a stored table.
REPLICATE_COLUMN = "_replicate"


@dataclass
class StoredReplicates:
    """Replicates of a release's bootstrap, restored on first use from their packed tables."""

    runs: int
    seed: int
    states: list[dict[str, Any]]
    shared: list[str]
    packed: dict[str, pa.Table]
    _releases: list[AnyRelease] | None = field(default=None, repr=False)
    #: The release kind's ``bootstrap_world_version`` the replicates were drawn in (None: the
    #: kind has none, or a release saved before versions were recorded).
    world: str | None = None

    @classmethod
    def from_replicates(
        cls, release: AnyRelease, replicates: Sequence[AnyRelease], seed: int
    ) -> StoredReplicates:
        """Pack ``replicates`` (re-runs of ``release``'s mechanism) for saving with ``release``."""
        own = release.tables()
        per_name: dict[str, list[pa.Table]] = {}
        states = []
        for rep in replicates:
            states.append(rep.state())
            for name, table in rep.tables().items():
                per_name.setdefault(name, []).append(table)
        packed: dict[str, pa.Table] = {}
        shared: list[str] = []
        for name, tables in per_name.items():
            if len(tables) != len(replicates):
                raise ReleaseError(
                    f"replicates disagree on their tables ({name!r} missing in some)"
                )
            if name in own and all(t.equals(own[name]) for t in tables):
                shared.append(name)
                continue
            numbered = [
                t.append_column(REPLICATE_COLUMN, pa.array(np.full(t.num_rows, b, dtype=np.int32)))
                for b, t in enumerate(tables)
            ]
            packed[PREFIX + name] = pa.concat_tables(numbered, promote_options="default")
        world = release.bootstrap_world_version
        return cls(len(replicates), seed, states, sorted(shared), packed, list(replicates), world)

    def manifest_entry(self) -> dict[str, Any]:
        entry = {"runs": self.runs, "seed": self.seed, "states": self.states, "shared": self.shared}
        if self.world is not None:
            entry["world"] = self.world
        return entry

    def matches(self, release: AnyRelease) -> bool:
        """Whether these replicates were drawn in the bootstrap world ``release`` builds today
        (a spatial release saved before its world was clustered was not: its replicates are
        then recomputed, not mixed with the new world's truth)."""
        return self.world == release.bootstrap_world_version

    @classmethod
    def from_saved(
        cls, entry: Mapping[str, Any], tables: Mapping[str, pa.Table], where: str
    ) -> StoredReplicates:
        """The stored replicates of a loaded manifest (``entry`` = its ``bootstrap``)."""
        try:
            runs, seed = int(entry["runs"]), int(entry["seed"])
            states = [dict(s) for s in entry["states"]]
            shared = [str(s) for s in entry["shared"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise ReleaseError(f"{where!r}: malformed 'bootstrap' entry ({exc})") from None
        if len(states) != runs:
            raise ReleaseError(
                f"{where!r}: 'bootstrap' records {runs} runs but {len(states)} states"
            )
        world = entry.get("world")
        return cls(
            runs, seed, states, shared, dict(tables), world=None if world is None else str(world)
        )

    def answers(
        self, release: AnyRelease, queries: Sequence[Mapping[str, Any]], keep_bytes: int = 0
    ) -> NDArray[np.float64]:
        """The (runs, q) answers of the replicates to ``queries``: in one vectorised pass over the
        packed tables where the kind has one (:meth:`Release.packed_replicate_answers`), else
        from the restored replicates (:meth:`Release.replicate_answers`, which keeps their
        summed-area tables while they fit in ``keep_bytes``)."""
        if not self.shared:
            unpacked = {name[len(PREFIX) :]: t for name, t in self.packed.items()}
            out = release.packed_replicate_answers(unpacked, self.runs, queries)
            if out is not None:
                return np.asarray(out, dtype=np.float64)
        return release.replicate_answers(self.releases(release), queries, keep_bytes)

    def releases(self, release: AnyRelease) -> list[AnyRelease]:
        """The replicates as releases of ``release``'s kind (restored once, then kept)."""
        if self._releases is None:
            own = release.tables() if self.shared else {}
            split: dict[str, list[pa.Table]] = {}
            for packed_name, table in self.packed.items():
                ids = column_numpy(table, REPLICATE_COLUMN)
                starts = np.searchsorted(ids, np.arange(self.runs + 1))
                body = table.drop_columns([REPLICATE_COLUMN])
                split[packed_name[len(PREFIX) :]] = [
                    body.slice(int(starts[b]), int(starts[b + 1] - starts[b]))
                    for b in range(self.runs)
                ]
            restored = []
            for b in range(self.runs):
                tables = {name: own[name] for name in self.shared}
                tables.update({name: parts[b] for name, parts in split.items()})
                restored.append(
                    type(release).restore(
                        release.schema,
                        _replicate_metadata(release.metadata),
                        tables,
                        self.states[b],
                    )
                )
            self._releases = restored
        return self._releases


def _replicate_metadata(metadata: ReleaseMetadata) -> ReleaseMetadata:
    """A replicate's metadata: the release's, marked seeded and unaccounted (it is a re-run on
    public data, never a publication)."""
    d = metadata.to_dict()
    d.update(seeded=True, accounted=False)
    return ReleaseMetadata.from_dict(d)


__all__ = ["PREFIX", "REPLICATE_COLUMN", "StoredReplicates"]
