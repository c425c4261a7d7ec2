"""The mechanism interface.

Configuration lives only in the constructor (as in scikit-learn); :meth:`Mechanism.release` takes
the data and a ``random_state`` and returns a :class:`dpcube.release.Release`.

Each mechanism declares, as code rather than a comment (as in OpenDP):

- ``neighbours``: the neighbour notions it supports (``add_remove``, ``replace``);
- :meth:`Mechanism.sensitivity_claims`: every deterministic measurement it makes of the data, with
  the norm and the sensitivity it calibrates the noise to. The conformance suite
  (:mod:`dpcube.mechanisms.conformance`) checks each claim by brute force on tiny domains;
- ``param_specs``: the domain of every constructor parameter (:class:`ParamSpec`), checked by the
  constructor itself (every ``__init__`` is wrapped to check its arguments first), by
  ``--param`` and drawn from by the audit and the fuzz tests;
- ``bytes_per_cell``: the peak memory of a release per cell of the domain (measured), so that a
  release that would run out of memory is refused before the charge.

:meth:`Mechanism.release` is a template of four steps, in this order:

1. :meth:`Mechanism.prepare` checks and converts the input; all counting of the data happens here
   (or before, in :func:`dpcube.histogram`), never after the charge;
2. :meth:`Mechanism.check_noise_scale` refuses an epsilon so small that the noise scale cannot be
   represented by the exact samplers, then :meth:`Mechanism.validate` runs every other check that
   does not depend on the noise (parameters against the data, plan, domain size), and
   :meth:`Mechanism.check_resources` refuses a release whose memory estimate exceeds what the
   machine has available;
3. the ledger is charged exactly once;
4. :meth:`Mechanism._release` draws the noise and builds the release (and nothing else may fail
   there for a reason the earlier steps could have seen).
"""

from __future__ import annotations

import copy
import functools
import inspect
import math
import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import numpy as np
from numpy.typing import NDArray

from dpcube.errors import (
    BudgetError,
    DataError,
    ParameterError,
    ResourceError,
    SpentBudgetError,
)
from dpcube.histogram import BoundCandidates, Histogram
from dpcube.mechanisms.params import ParamSpec, specs_by_name
from dpcube.privacy.accounting import charge_release
from dpcube.privacy.ledger import BudgetLedger, RequestedTotal, validate_privacy
from dpcube.privacy.neighbours import Neighbour
from dpcube.privacy.random import RandomSource, resolve_random_state
from dpcube.privacy.unit import ROW, PrivacyUnit
from dpcube.privacy.unit_choice import choose_max_rows_per_unit
from dpcube.release.base import Release, ReleaseMetadata
from dpcube.schema import Schema

#: The privacy arguments every constructor takes (the guarantee, not the configuration).
_PRIVACY_ARGUMENTS = ("epsilon", "delta", "neighbour")


#: Largest integer noise scale the exact samplers draw (their integer arithmetic is int64).
_MAX_SAMPLER_SCALE = 2.0**62
#: Largest noise scale (sensitivity / epsilon) a release may ask for: 2**40 (about 1.1e12) is far
#: beyond any count (it would drown them all) and keeps every sampler in exact integer arithmetic.
_MAX_NOISE_SCALE = 2.0**40
#: Smallest noise scale (sensitivity / epsilon) a release may ask for: below about 1/745 the
#: variance of integer discrete Laplace noise, 2 e^(-1/b) / (1 - e^(-1/b))^2 for scale b, is 0
#: in floating point (no noise is drawn and inverse-variance weights divide by zero), and a scale
#: of 2**-8 is an epsilon of 256 per unit of sensitivity, whose e^epsilon = 1.5e111 bounds no
#: privacy loss anyway.
_MIN_NOISE_SCALE = 2.0**-8
#: Grid bits of the snapped samplers (:func:`dpcube.privacy.samplers.snapped_laplace`).
_SNAP_BITS = 24


def available_memory() -> int:
    """Bytes of memory available to a new allocation: ``MemAvailable`` of ``/proc/meminfo``
    (Linux), else the physical memory (``os.sysconf``), else 8 GiB."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return 8 * 2**30


#: Peak memory of a release per domain cell when a mechanism declares none (bytes): a dense int64
#: array and about nine working copies of it.
DEFAULT_BYTES_PER_CELL = 80.0
#: Memory a release needs whatever its domain (bytes): the interpreter's working set.
BASE_RELEASE_BYTES = 64 << 20


def _checked_init(init: Callable[..., None]) -> Callable[..., None]:
    """``init`` preceded by the check of every argument that has a :class:`ParamSpec`."""
    signature = inspect.signature(init)

    @functools.wraps(init)
    def checked(
        self: Mechanism, *args: Any, privacy_unit: PrivacyUnit | None = None, **kwargs: Any
    ) -> None:
        if privacy_unit is not None:
            self.privacy_unit = _checked_unit(type(self), privacy_unit)
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError as exc:
            known = ", ".join(type(self).accepted_params()) or "none"
            raise _argument_error(type(self), str(exc), known) from None
        specs = type(self).param_spec_map()
        for name, value in bound.arguments.items():
            spec = specs.get(name)
            if spec is not None:
                bound.arguments[name] = spec.check(type(self).name, value)
        init(*bound.args, **bound.kwargs)

    checked.__dict__["_checks_params"] = True
    return checked


def _checked_unit(cls: type[Mechanism], unit: Any) -> PrivacyUnit:
    """The ``privacy_unit`` constructor argument of every mechanism, checked."""
    if not isinstance(unit, PrivacyUnit):
        raise ParameterError(
            f"{getattr(cls, 'name', cls.__name__)}: privacy_unit must be a "
            f"dpcube.privacy.PrivacyUnit, got {unit!r}"
        )
    if not unit.is_row and cls.unit_refusal:
        raise ParameterError(f"{cls.name}: {cls.unit_refusal}")
    return unit


def _argument_error(cls: type[Mechanism], why: str, known: str) -> DataError:
    """The refusal of an unknown or missing constructor argument."""
    return ParameterError(f"{getattr(cls, 'name', cls.__name__)}: {why}; parameters: {known}")


def check_share_scale(owner: str, what: str, sensitivity: float, epsilon_share: float) -> None:
    """Refuse (before the charge) a part of the budget so small that the exact samplers cannot
    represent its noise: the same bounds as :meth:`Mechanism.check_noise_scale`, for a measurement
    of ``sensitivity`` drawn with ``epsilon_share`` (one coordinate)."""
    scale = sensitivity / epsilon_share if epsilon_share > 0 else math.inf
    enlarge = 1.0 + 2.0**-_SNAP_BITS / epsilon_share if epsilon_share > 0 else math.inf
    if not (scale <= _MAX_NOISE_SCALE and enlarge * 2.0**_SNAP_BITS < _MAX_SAMPLER_SCALE):
        raise BudgetError(
            f"{owner}: {what} leaves epsilon {epsilon_share:.3g} to one measurement, whose noise "
            f"scale {scale:.3g} is beyond the exact samplers (at most 2**40); raise it, or raise "
            "epsilon"
        )


@dataclass(frozen=True)
class SensitivityClaim:
    """A deterministic measurement ``function(counts) -> vector`` and its declared sensitivity.

    The noise added to the measurement is calibrated so that a change of ``declared`` in the
    ``norm`` ("l1" or "l2"; "linf" for the scores of an exponential mechanism, each of which may
    move by ``declared``) between neighbouring inputs costs the claimed privacy. ``tight`` says
    the bound is attained (the conformance suite then checks equality, not just the bound).
    """

    name: str
    function: Callable[[NDArray[np.int64]], NDArray[np.float64]]
    norm: str
    declared: float
    tight: bool = True


@dataclass
class CheckedRelease:
    """A release prepared and checked (:meth:`Mechanism.check_release`) whose noise is not drawn
    yet: ``metadata.accounted`` must say whether the budget was charged before :meth:`draw`."""

    mechanism: Mechanism
    prepared: Any
    source: RandomSource
    metadata: ReleaseMetadata

    def draw(self, *, charged: bool) -> Release:
        """Step 4 of :meth:`Mechanism.release`: draw the noise and build the release. A failure
        here comes after the charge and says so (:class:`SpentBudgetError`)."""
        mechanism = self.mechanism
        try:
            release = mechanism._release(self.prepared, self.source, self.metadata)
        except Exception as exc:
            spent = "charged" if charged else "not charged (account=False)"
            raise SpentBudgetError(
                f"{mechanism.name}: the release failed after its budget was {spent} "
                f"(epsilon={mechanism.epsilon:g}); nothing was released or written: "
                f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            ) from exc
        # Exact diagnostics of the input (rows, dropped, clipped, users...): for the curator only,
        # never saved with the release (see Release.curator_log).
        log = dict(getattr(self.prepared, "report", {}) or {})
        log.update(release.curator_log)
        release.curator_log = log
        return release


class Mechanism(ABC):
    """Base of every dpcube mechanism."""

    #: Registry name (``--mechanism``).
    name: ClassVar[str]
    #: Neighbour notions the mechanism supports.
    neighbours: ClassVar[tuple[Neighbour, ...]] = (Neighbour.ADD_REMOVE, Neighbour.REPLACE)
    #: The domain of each constructor parameter besides the privacy flags (a subclass's spec of
    #: the same name replaces its base's).
    param_specs: ClassVar[tuple[ParamSpec, ...]] = ()
    #: Peak memory of a release per cell of the domain, in bytes (see :meth:`check_resources`).
    bytes_per_cell: ClassVar[float] = DEFAULT_BYTES_PER_CELL
    #: Why the mechanism refuses a privacy unit other than the row ("" when it supports one).
    unit_refusal: ClassVar[str] = ""
    #: The unit one neighbouring step adds or removes (:mod:`dpcube.privacy.unit`): the row by
    #: default; set by the ``privacy_unit`` keyword every constructor takes, or taken from the
    #: input's bound at release (:meth:`unit_for`). Every sensitivity follows from it.
    privacy_unit: PrivacyUnit = ROW

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is not None and not init.__dict__.get("_checks_params"):
            cls.__init__ = _checked_init(init)  # type: ignore[method-assign]

    @classmethod
    def param_spec_map(cls) -> dict[str, ParamSpec]:
        """``{name: ParamSpec}`` over the class and its bases (the subclass's spec wins)."""
        specs: list[ParamSpec] = []
        for klass in reversed(cls.__mro__):
            specs.extend(klass.__dict__.get("param_specs", ()))
        return specs_by_name(specs)

    @classmethod
    def parameters(cls) -> list[ParamSpec]:
        """The declared spec of every parameter ``--param`` accepts, in constructor order."""
        specs = cls.param_spec_map()
        return [specs[n] for n in cls.accepted_params() if n in specs]

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

    def integer_unavailable(self, schema: Schema | None) -> str | None:
        """Why this mechanism's release cannot be made whole (``dpcube release --integer``:
        :meth:`dpcube.release.base.Release.to_integer`), known before the data is read and the
        budget charged; None (the default) where it can."""
        return None

    # -- declared privacy --------------------------------------------------------------------
    def histogram_sensitivity(self, norm: str) -> float:
        """The sensitivity of the histogram to one neighbouring step of :attr:`privacy_unit` under
        this mechanism's neighbour notion (:meth:`PrivacyUnit.histogram_sensitivity`)."""
        return self.privacy_unit.histogram_sensitivity(self.neighbour, norm)

    def unit_for(self, data: Any) -> PrivacyUnit:
        """The unit a release of ``data`` protects: the bound the input was counted with
        (``data.privacy_unit``), or the one this mechanism was built with, which must then
        cover the input's bound (refused otherwise, before anything is counted or charged)."""
        counted = getattr(data, "privacy_unit", ROW)
        if not isinstance(counted, PrivacyUnit):
            counted = ROW
        declared = self.privacy_unit
        if not counted.is_row and self.unit_refusal:
            raise ParameterError(f"{self.name}: {self.unit_refusal}")
        if declared.is_row:
            return counted
        if counted.is_row:
            raise DataError(
                f"{self.name} protects {declared.describe()} but the input was not bounded per "
                "unit; count it with dpcube.histogram(source, schema, privacy_unit=COLUMN, "
                f"max_rows_per_unit={declared.max_rows_per_unit}) (dpcube release --privacy-unit "
                f"COLUMN --max-rows-per-unit {declared.max_rows_per_unit})"
            )
        if declared.column is not None and declared.column != counted.column:
            raise DataError(
                f"{self.name} protects units of column {declared.column!r} but the input was "
                f"bounded per {counted.column!r}; count it with privacy_unit={declared.column!r}"
            )
        if not declared.covers(counted):
            raise DataError(
                f"the input keeps up to {counted.max_rows_per_unit} rows per unit "
                f"{counted.column!r} ({counted.manifest()}) but {self.name} is built for "
                f"{declared.manifest()}; build it for the input's bound or bound the input to "
                "the mechanism's"
            )
        return declared.with_column(counted.column)

    def with_unit(self, unit: PrivacyUnit) -> Self:
        """A copy of this mechanism protecting ``unit`` (this one is left as it is)."""
        if unit == self.privacy_unit:
            return self
        twin = copy.copy(self)
        twin.privacy_unit = _checked_unit(type(self), unit)
        return twin

    @property
    def charged_delta(self) -> float | None:
        """The delta the guarantee uses: ``delta`` with Gaussian noise, else ``None``.

        A Laplace (pure epsilon-DP) release given a delta neither claims nor charges it.
        """
        return self.delta if getattr(self, "noise", None) == "gaussian" else None

    @abstractmethod
    def sensitivity_claims(self, schema: Schema) -> list[SensitivityClaim]:
        """Every measurement of the data with the sensitivity its noise is calibrated to."""

    @classmethod
    def conformance_cases(cls) -> list[Any]:
        """Tiny-domain cases for :mod:`dpcube.mechanisms.conformance` (every mechanism must give some)."""
        raise NotImplementedError(f"{cls.__name__} declares no conformance cases")

    @classmethod
    def accepted_params(cls) -> list[str]:
        """The configuration parameters: the constructor's arguments besides the privacy ones
        (``epsilon``, ``delta``, ``neighbour``)."""
        names: list[str] = []
        for klass in cls.__mro__:
            init = klass.__dict__.get("__init__")
            if init is None or klass is object:
                continue
            params = inspect.signature(init).parameters.values()
            for p in params:
                if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                    continue
                if p.name not in ("self", *_PRIVACY_ARGUMENTS, *names):
                    names.append(p.name)
            if not any(p.kind == p.VAR_KEYWORD for p in params):
                break
        return names

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
            delta=self.charged_delta,
            neighbour=self.neighbour,
            privacy_unit=self.privacy_unit.manifest(),
            seeded=source.seeded,
            noiseless=source.noiseless,
        )

    def release(
        self,
        data: Any,
        random_state: Any = None,
        *,
        ledger: BudgetLedger | None = None,
        account: bool = True,
        requested_total: RequestedTotal | None = None,
    ) -> Release:
        """Release ``data`` under this mechanism's guarantee.

        ``random_state``: ``None`` draws from OS entropy; an int seed or numpy Generator makes the
        release reproducible and marks it not for publication; :data:`dpcube.privacy.NO_NOISE`
        switches noise off (tests only).

        Accounting (:func:`dpcube.privacy.accounting.charge_release`) is on by default: the cost
        (epsilon, and delta when the noise uses it) is charged once, before any noise is drawn, to
        ``ledger`` or else to the ledger of the data set ``data`` was counted from; a charge that
        does not fit raises and nothing is released. ``account=False`` releases unaccounted (the
        manifest says so; never for publication). Seeded and noiseless releases are charged only
        to a ``ledger`` passed explicitly. ``requested_total`` becomes the ledger's total if it
        has none, and must equal the recorded total otherwise, in the transaction of the charge.
        """
        if isinstance(data, BoundCandidates):
            return self._release_choosing_bound(
                data, random_state, ledger=ledger, account=account, requested_total=requested_total
            )
        unit = self.unit_for(data)
        if unit != self.privacy_unit:
            return self.with_unit(unit).release(
                data,
                random_state,
                ledger=ledger,
                account=account,
                requested_total=requested_total,
            )
        checked = self.check_release(data, random_state)
        # -- the one charge: everything above is checked; only the noise and the build follow ---
        charge_release(
            self,
            checked.prepared,
            checked.metadata,
            ledger=ledger,
            account=account,
            seeded=checked.source.seeded or checked.source.noiseless,
            origin=data,
            requested_total=requested_total,
        )
        return checked.draw(charged=account)

    def check_release(self, data: Any, random_state: Any = None) -> CheckedRelease:
        """Steps 1 and 2 of :meth:`release`: prepare ``data`` and run every check that does not
        depend on the noise, charging nothing. The result's :meth:`CheckedRelease.draw` is step 4;
        whoever calls this instead of :meth:`release` owns step 3, the one charge (a publication
        of several tables charges their sum once: :mod:`dpcube.planning.publication`)."""
        unit = self.unit_for(data)
        if unit != self.privacy_unit:
            return self.with_unit(unit).check_release(data, random_state)
        prepared = self.prepare(data)
        source = resolve_random_state(random_state)
        metadata = self.metadata(prepared, source)
        schema = getattr(prepared, "schema", None)
        if isinstance(schema, Schema):
            metadata.sensitivity = {c.name: c.declared for c in self.sensitivity_claims(schema)}
        self.check_noise_scale(prepared)
        self.validate(prepared)
        self.check_resources(prepared)
        return CheckedRelease(self, prepared, source, metadata)

    def _release_choosing_bound(
        self,
        data: BoundCandidates,
        random_state: Any,
        *,
        ledger: BudgetLedger | None,
        account: bool,
        requested_total: RequestedTotal | None,
    ) -> Release:
        """:meth:`release` of an input whose bound K is chosen privately
        (:mod:`dpcube.privacy.unit_choice`), in the template's order: every candidate K is
        prepared and validated (noise scale, parameters, memory) with the mechanism at its share
        ``(1 - s) epsilon``; the ledger is charged once, ``epsilon`` in all (the choice's
        ``s epsilon`` and the mechanism's); then the choice's noise is drawn, K chosen (scored
        with :meth:`noise_per_row`), and the input counted at K released. Sequential composition (Dwork and Roth, 2014, Theorem
        3.16): the choice and the release together are epsilon-DP for one unit; the mechanism's
        delta, if any, is its own."""
        if not self.privacy_unit.is_row:
            raise ParameterError(
                f"{self.name}: the input's bound is chosen by the release (max_rows_per_unit="
                f"'auto'); build the mechanism without a privacy unit (it has "
                f"{self.privacy_unit.manifest()})"
            )
        if self.unit_refusal:
            raise ParameterError(f"{self.name}: {self.unit_refusal}")
        share = data.selection_share
        choosing = self.epsilon * share
        inner = copy.copy(self)
        inner.epsilon = self.epsilon - choosing
        ready: dict[int, tuple[Mechanism, Any]] = {}
        for k, counted in sorted(data.at_bound.items()):
            twin = inner.with_unit(counted.privacy_unit)
            prepared = twin.prepare(counted)
            twin.check_noise_scale(prepared)
            twin.validate(prepared)
            twin.check_resources(prepared)
            ready[k] = (twin, prepared)
        source = resolve_random_state(random_state)
        largest, prepared_largest = ready[max(ready)]
        noise_per_row = inner.noise_per_row(prepared_largest)  # data-independent, before the charge
        metadata = largest.metadata(prepared_largest, source)
        metadata.epsilon = self.epsilon
        # -- the one charge, of the whole epsilon: everything above is checked -----------------
        charge_release(
            self,
            prepared_largest,
            metadata,
            ledger=ledger,
            account=account,
            seeded=source.seeded or source.noiseless,
            origin=data,
            requested_total=requested_total,
        )
        try:
            choice = choose_max_rows_per_unit(
                data.unit_sizes,
                epsilon=choosing,
                share=share,
                neighbour=self.neighbour,
                noise_per_row=noise_per_row,
                source=source,
            )
            chosen, prepared = ready[choice.max_rows_per_unit]
            metadata.params = chosen.get_params()
            metadata.params["epsilon"] = inner.epsilon
            unit = chosen.privacy_unit.manifest()
            assert isinstance(unit, dict)  # a column and a bound, never the row
            metadata.privacy_unit = {**unit, "chosen_privately": choice.manifest()}
            schema = getattr(prepared, "schema", None)
            if isinstance(schema, Schema):
                metadata.sensitivity = {
                    c.name: c.declared for c in chosen.sensitivity_claims(schema)
                }
            release = chosen._release(prepared, source, metadata)
        except Exception as exc:
            spent = "charged" if account else "not charged (account=False)"
            raise SpentBudgetError(
                f"{self.name}: the release failed after its budget was {spent} "
                f"(epsilon={self.epsilon:g}); nothing was released or written: "
                f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            ) from exc
        metadata.epsilon = self.epsilon
        log = dict(getattr(prepared, "report", {}) or {})
        log["unit_sizes_exact"] = {
            "units_per_log2_bin": data.unit_sizes.counts.tolist(),
            "rows_per_log2_bin": data.unit_sizes.rows.tolist(),
        }
        log.update(release.curator_log)
        release.curator_log = log
        return release

    def noise_per_row(self, data: Any) -> float:
        """The noise a release of the prepared ``data`` adds, summed over its cells, per row of
        the bound K (standard deviations at K = 1): what one more row per unit costs in the
        choice of K (:mod:`dpcube.privacy.unit_choice`, step 4). By default the identity
        mechanism's, ``d sqrt(2) / epsilon`` for the schema's d cells (a Laplace count of scale
        ``K / epsilon`` in each); override where the release's noise is another."""
        cells = float(np.prod(data.schema.shape, dtype=np.float64))
        return cells * math.sqrt(2.0) / self.epsilon

    def validate(self, data: Any) -> None:
        """Every check of the prepared input that does not depend on the noise (a hook).

        Runs before the ledger is charged. Override to check parameters against the data, build
        and check the plan, and bound the memory a release needs; raise a :class:`DPCubeError`.
        """
        return

    def materialised_cells(self, data: Any) -> float:
        """The cells a release of ``data`` holds in memory: the whole domain by default; override
        when the mechanism materialises less (a data cube's measured cuboids)."""
        schema = getattr(data, "schema", None)
        return float(np.prod(schema.shape, dtype=np.float64)) if isinstance(schema, Schema) else 0.0

    def memory_estimate(self, data: Any) -> float:
        """Peak bytes a release of ``data`` needs beyond its input: :attr:`bytes_per_cell` times
        :meth:`materialised_cells`, plus :data:`BASE_RELEASE_BYTES`."""
        return self.materialised_cells(data) * self.bytes_per_cell + BASE_RELEASE_BYTES

    def check_resources(self, data: Any) -> None:
        """Refuse, before the charge, a release whose memory estimate (:meth:`memory_estimate`)
        exceeds the memory available now (:func:`available_memory`): it would fail after the
        budget was spent."""
        need = self.memory_estimate(data)
        have = available_memory()
        if need > have:
            cells = self.materialised_cells(data)
            raise ResourceError(
                f"{self.name}: a release of these {cells:,.0f} cells needs about "
                f"{need / 2**30:.2f} GiB of memory ({self.bytes_per_cell:g} bytes a cell, "
                f"measured) but {have / 2**30:.2f} GiB is available; nothing was charged; use "
                "coarser bins or fewer attributes, or free memory"
            )

    def noise_support(self, data: Any) -> float:
        """An upper bound on the noisy coordinates one neighbour can change (the ``support`` of
        the snapped samplers): the number of cells of the schema by default; override when the
        mechanism measures less than the full domain."""
        schema = getattr(data, "schema", None)
        if not isinstance(schema, Schema):
            return 1.0
        return float(np.prod(schema.shape, dtype=np.float64))

    def check_noise_scale(self, data: Any) -> None:
        """Refuse an epsilon so small that the exact samplers cannot represent the noise scale,
        or so large that the scale ``sensitivity / epsilon`` falls below ``2**-8`` (no noise).

        For each claim the scale is ``sensitivity / epsilon``, at most ``2**40`` (noise beyond
        that drowns every count, and mechanisms that split epsilon further stay exact); the snapped
        samplers then enlarge
        it by ``1 + support 2**-24 / epsilon`` (``support`` from :meth:`noise_support`) and draw
        an integer scale up to ``2**24`` times that, which must stay within int64. Both are
        checked here, before the charge.
        """
        schema = getattr(data, "schema", None)
        claims = self.sensitivity_claims(schema) if isinstance(schema, Schema) else []
        declared = max((c.declared for c in claims), default=1.0)
        if declared / self.epsilon < _MIN_NOISE_SCALE:
            raise BudgetError(
                f"epsilon={self.epsilon:g} is too large: the noise scale sensitivity/epsilon = "
                f"{declared:g}/{self.epsilon:g} is below 2**-8, where the samplers draw no noise "
                f"at all; use epsilon <= {declared / _MIN_NOISE_SCALE:g} (an epsilon above about "
                "20 already promises no meaningful privacy)"
            )
        cells = self.noise_support(data)
        enlarge = 1.0 + cells * 2.0**-_SNAP_BITS / self.epsilon
        worst = max((c.declared for c in claims), default=1.0) / self.epsilon
        if not (worst <= _MAX_NOISE_SCALE and enlarge * 2.0**_SNAP_BITS < _MAX_SAMPLER_SCALE):
            least = max(
                declared / _MAX_NOISE_SCALE,
                cells * 2.0**-_SNAP_BITS / (_MAX_SAMPLER_SCALE / 2.0**_SNAP_BITS - 1),
            )
            raise BudgetError(
                f"epsilon={self.epsilon:g} is too small: the noise scale cannot be represented by "
                f"the exact samplers; use epsilon >= {least:.3g} (such noise would drown every "
                "count anyway)"
            )

    @abstractmethod
    def _release(self, data: Any, source: RandomSource, metadata: ReleaseMetadata) -> Release:
        """Draw the noise and build the release (``metadata.noise`` is the subclass's to fill)."""
