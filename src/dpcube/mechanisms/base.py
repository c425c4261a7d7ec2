"""The mechanism interface.

Configuration lives only in the constructor (as in scikit-learn); :meth:`Mechanism.release` takes
the data and a ``random_state`` and returns a :class:`dpcube.release.Release`.

Each mechanism declares, as code rather than a comment (as in OpenDP):

- ``neighbours``: the neighbour notions it supports (``add_remove``, ``replace``);
- :meth:`Mechanism.sensitivity_claims`: every deterministic measurement it makes of the data, with
  the norm and the sensitivity it calibrates the noise to. The conformance suite
  (:mod:`dpcube.testing.conformance`) checks each claim by brute force on tiny domains.

:meth:`Mechanism.release` is a template: it validates the input, charges the ledger exactly once
(before any noise is drawn), then calls the subclass's :meth:`Mechanism._release`.
"""

from __future__ import annotations

import argparse
import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from dpcube.errors import BudgetError, DataError
from dpcube.histogram import Histogram
from dpcube.privacy.ledger import BudgetLedger, validate_privacy
from dpcube.privacy.neighbours import Neighbour
from dpcube.privacy.random import RandomSource, resolve_random_state
from dpcube.release.base import Release, ReleaseMetadata
from dpcube.schema import Schema


@dataclass(frozen=True)
class SensitivityClaim:
    """A deterministic measurement ``function(counts) -> vector`` and its declared sensitivity.

    The noise added to the measurement is calibrated so that a change of ``declared`` in the
    ``norm`` ("l1" or "l2") between neighbouring inputs costs the claimed privacy. ``tight`` says
    the bound is attained (the conformance suite then checks equality, not just the bound).
    """

    name: str
    function: Callable[[NDArray[np.int64]], NDArray[np.float64]]
    norm: str
    declared: float
    tight: bool = True


class Mechanism(ABC):
    """Base of every dpcube mechanism."""

    #: Registry name (``--mechanism``).
    name: ClassVar[str]
    #: Neighbour notions the mechanism supports.
    neighbours: ClassVar[tuple[Neighbour, ...]] = (Neighbour.ADD_REMOVE, Neighbour.REPLACE)

    def __init__(
        self, epsilon: float, delta: float | None = None, neighbour: str = "add_remove"
    ) -> None:
        validate_privacy(epsilon, delta)
        self.epsilon = float(epsilon)
        self.delta = None if delta is None or delta == 0 else float(delta)
        self.neighbour = Neighbour.parse(neighbour).value
        if Neighbour(self.neighbour) not in self.neighbours:
            supported = ", ".join(n.value for n in self.neighbours)
            raise BudgetError(
                f"{self.name} does not support neighbour {self.neighbour!r} (supported: {supported})"
            )

    # -- declared privacy --------------------------------------------------------------------
    @abstractmethod
    def sensitivity_claims(self, schema: Schema) -> list[SensitivityClaim]:
        """Every measurement of the data with the sensitivity its noise is calibrated to."""

    @classmethod
    def conformance_cases(cls) -> list[Any]:
        """Tiny-domain cases for :mod:`dpcube.testing.conformance` (every mechanism must give some)."""
        raise NotImplementedError(f"{cls.__name__} declares no conformance cases")

    # -- command line (``dpcube release --mechanism NAME``) -------------------------------------
    @classmethod
    def add_cli_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """Add this mechanism's own flags to ``dpcube release`` (names must not clash).

        The default adds none: ``--param key=value`` reaches every constructor argument.
        """
        return

    @classmethod
    def from_cli(cls, args: argparse.Namespace, params: dict[str, Any]) -> Mechanism:
        """Build the mechanism from ``dpcube release`` arguments and ``--param key=value`` pairs."""
        return cls(epsilon=args.epsilon, delta=args.delta, neighbour=args.neighbour, **params)

    @classmethod
    def cli_data(cls, args: argparse.Namespace, schema: Schema | None) -> Any:
        """The input of :meth:`release` from ``dpcube release`` arguments (a histogram by default)."""
        from dpcube.errors import SchemaError
        from dpcube.histogram import histogram

        if schema is None:
            raise SchemaError(f"--mechanism {cls.name} needs --schema")
        return histogram(
            args.data,
            schema,
            on_out_of_domain=args.on_out_of_domain,
            engine=getattr(args, "engine", "duckdb"),
        )

    # -- scikit-learn style parameters ---------------------------------------------------------
    def get_params(self) -> dict[str, Any]:
        """Constructor parameters, read back from attributes of the same names."""
        sig = inspect.signature(type(self).__init__)
        params: dict[str, Any] = {}
        for name, p in sig.parameters.items():
            if name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            value = getattr(self, name, p.default)
            params[name] = list(value) if isinstance(value, tuple) else value
        return params

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    # -- releasing ---------------------------------------------------------------------------
    def prepare(self, data: Any) -> Any:
        """Check and convert the input of :meth:`release` (a :class:`Histogram` by default)."""
        if not isinstance(data, Histogram):
            raise DataError(
                f"{type(self).__name__}.release needs a dpcube.Histogram; build one with "
                "dpcube.histogram(source, schema) or dpcube.Histogram(schema, counts)"
            )
        return data

    def metadata(self, data: Any, source: RandomSource) -> ReleaseMetadata:
        """The release's metadata: parameters and guarantee only, never a figure of the data (the
        input's exact data report goes to :attr:`Release.curator_log`, see :meth:`release`)."""
        return ReleaseMetadata(
            mechanism=self.name,
            params=self.get_params(),
            epsilon=self.epsilon,
            delta=self.delta,
            neighbour=self.neighbour,
            seeded=source.seeded,
            noiseless=source.noiseless,
        )

    def release(
        self, data: Any, random_state: Any = None, *, ledger: BudgetLedger | None = None
    ) -> Release:
        """Release ``data`` under this mechanism's guarantee.

        ``random_state``: ``None`` draws from OS entropy; an int seed or numpy Generator makes the
        release reproducible and marks it not for publication; :data:`dpcube.privacy.NO_NOISE`
        switches noise off (tests only). With a ``ledger`` the cost (epsilon, delta) is charged
        once, before any noise is drawn; a charge that does not fit raises and nothing is released.
        """
        prepared = self.prepare(data)
        source = resolve_random_state(random_state)
        metadata = self.metadata(prepared, source)
        schema = getattr(prepared, "schema", None)
        if isinstance(schema, Schema):
            metadata.sensitivity = {c.name: c.declared for c in self.sensitivity_claims(schema)}
        if ledger is not None:
            ledger.charge(
                self.epsilon, self.delta, mechanism=self.name, release_id=metadata.release_id
            )
        release = self._release(prepared, source, metadata)
        # Exact diagnostics of the input (rows, dropped, clipped, users...): for the curator only,
        # never saved with the release (see Release.curator_log).
        log = dict(getattr(prepared, "report", {}) or {})
        log.update(release.curator_log)
        release.curator_log = log
        return release

    @abstractmethod
    def _release(self, data: Any, source: RandomSource, metadata: ReleaseMetadata) -> Release:
        """Draw the noise and build the release (``metadata.noise`` is the subclass's to fill)."""
